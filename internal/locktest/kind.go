package locktest

import (
	"go.uber.org/goleak"

	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/redlock"
)

// Kind is a lock kind for the tests that need more than a Mutex (options,
// Vouch, CheckNodes, the error types, the test hooks): package redlock or
// package single. Both make a *redlock.Client; Kind holds what really differs
// between them, and the package's test hooks (export_test.go), which only its
// own tests can reach.
type Kind struct {
	// Nodes is how many redis-server processes a lock spans.
	Nodes int
	// New is the package's constructor (redlock.New; for single, single.New
	// over clients[0]). It is given Nodes clients.
	New func(clients []redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error)
	// DefaultQuarantine is the restart quarantine when no WithQuarantine is
	// given (redlock: redlock.DefaultQuarantine; single: 0, off).
	DefaultQuarantine time.Duration
	// ACLUnused are the parts of redistest.LockACL that this kind never
	// needs (single: "+pttl", which only fenced Redlock's second phase sends).
	ACLUnused []string
	// WithoutClockFloor is the package's test hook that turns the clock
	// floor of fencing tokens off.
	WithoutClockFloor func() redlock.Option
	// WakeState is the package's test hook that reports how many Lock calls
	// of c wait for the full key and on how many nodes c has its release
	// channel subscribed.
	WakeState func(c *redlock.Client, key string) (waiting, subscribed int)
	// SetClock is the package's test hook that replaces the clock that
	// measures elapsed time in c's acquires and extends.
	SetClock func(c *redlock.Client, now func() time.Time)
	// ClientGoroutines are the goroutines the kind's Redis client runs for
	// its connections (rueidis: a reader and a writer per connection),
	// which a test that checks that a call left no goroutine behind
	// ignores: they belong to the client, not to the lock.
	ClientGoroutines []goleak.Option
}

// quarantineOn returns the options that turn the restart quarantine on:
// none where it is on by default (the default is what is tested), else 10s.
func (k Kind) quarantineOn() []redlock.Option {
	if k.DefaultQuarantine > 0 {
		return nil
	}
	return []redlock.Option{redlock.WithQuarantine(10 * time.Second)}
}

// quarantineOff returns the options that turn the restart quarantine off:
// none where it is off by default.
func (k Kind) quarantineOff() []redlock.Option {
	if k.DefaultQuarantine > 0 {
		return []redlock.Option{redlock.WithQuarantine(0)}
	}
	return nil
}

// opts joins option lists.
func opts(lists ...[]redlock.Option) []redlock.Option {
	var out []redlock.Option
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// client returns a Client of kind k over clients, closed when the test ends.
// The nodes are brand new: it vouches for them, as the docs tell users to (an
// error here means some node is down, in use or refuses the user; tests that
// want that check it themselves).
func (k Kind) client(t *testing.T, clients []redis.UniversalClient, o ...redlock.Option) *redlock.Client {
	t.Helper()
	c := k.unvouched(t, clients, o...)
	_ = c.Vouch(context.Background())
	return c
}

// defaultClient is client where the restart quarantine is on by default, and
// unvouched where it is off (then nothing needs vouching for).
func (k Kind) defaultClient(t *testing.T, clients []redis.UniversalClient, o ...redlock.Option) *redlock.Client {
	t.Helper()
	if k.DefaultQuarantine > 0 {
		return k.client(t, clients, o...)
	}
	return k.unvouched(t, clients, o...)
}

// unvouched is client without the Vouch.
func (k Kind) unvouched(t *testing.T, clients []redis.UniversalClient, o ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := k.New(clients, o...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mutex returns c's mutex for key.
func mutex(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMutex(key, o...)
	require.NoError(t, err)
	return m
}

// Tokens takes m n times (TryLock, Extend, Release) and asserts that every
// token is above the one before and that Extend keeps it. It returns the
// last token.
func Tokens(ctx context.Context, t *testing.T, m *redlock.Mutex, n int) fencing.Token {
	t.Helper()
	var last fencing.Token
	for i := 0; i < n; i++ {
		l, err := m.TryLock(ctx)
		require.NoError(t, err, "acquisition %d of %q", i, m.Key())
		assert.Greater(t, l.Token(), last, "tokens increase with every acquisition")
		last = l.Token()
		require.NoError(t, l.Extend(ctx))
		assert.Equal(t, last, l.Token(), "Extend keeps the token")
		require.NoError(t, l.Release(ctx))
	}
	return last
}

// LockThenRelease runs m.Lock in a goroutine and, once it holds the lock,
// releases it. It sends the first error, or nil, on the channel it returns.
func LockThenRelease(ctx context.Context, m *redlock.Mutex) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	return got
}

// nodeMicros reads a node's clock (TIME) in microseconds.
func nodeMicros(ctx context.Context, t *testing.T, c redis.UniversalClient) fencing.Token {
	t.Helper()
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	return fencing.Token(now.UnixMicro())
}

// clockRange returns the lowest and the highest clock among the nodes.
func clockRange(ctx context.Context, t *testing.T, clients []redis.UniversalClient) (lo, hi fencing.Token) {
	t.Helper()
	for i, c := range clients {
		now := nodeMicros(ctx, t, c)
		if i == 0 || now < lo {
			lo = now
		}
		hi = max(hi, now)
	}
	return lo, hi
}

// ConfigCase is a setup that a kind's New must refuse (see Refused).
type ConfigCase struct {
	name, want string
	clients    []redis.UniversalClient
	opts       []redlock.Option
}

// Refused is the case name: New over clients with opts fails, and its error
// carries want.
func Refused(name, want string, clients []redis.UniversalClient, opts ...redlock.Option) ConfigCase {
	return ConfigCase{name: name, want: want, clients: clients, opts: opts}
}

// NewRefuses runs each case as a subtest: k.New returns no Client and a
// *ConfigError whose message carries prefix (the package's name) and the
// case's want.
func NewRefuses(t *testing.T, k Kind, prefix string, cases []ConfigCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := k.New(tc.clients, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, c)
			var ce *redlock.ConfigError
			assert.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), prefix)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// eachClockFloor runs test as the subtests ClockFloor=true and
// ClockFloor=false, with the options of each: WithFencing, and for the
// control without the floor k.WithoutClockFloor too.
func (k Kind) eachClockFloor(t *testing.T, test func(t *testing.T, floor bool, o []redlock.Option)) {
	for _, floor := range []bool{true, false} {
		t.Run(fmt.Sprintf("ClockFloor=%v", floor), func(t *testing.T) {
			o := []redlock.Option{redlock.WithFencing()}
			if !floor {
				o = append(o, k.withoutClockFloor(t))
			}
			test(t, floor, o)
		})
	}
}

// withoutClockFloor is the package's hook that turns the clock floor off;
// t is skipped where the package's hooks are out of reach (nil).
func (k Kind) withoutClockFloor(t *testing.T) redlock.Option {
	t.Helper()
	if k.WithoutClockFloor == nil {
		t.Skip("the package's clock-floor hook is out of this module's reach: the control without the floor runs in redlock's tests")
	}
	return k.WithoutClockFloor()
}

// wakeState is the package's WakeState hook for c, or, where it is out of
// reach (nil), what the nodes show: the most waiters queued for key on a
// node, and on how many nodes some client listens for key's grants.
func (k Kind) wakeState(c *redlock.Client, nodes []redis.UniversalClient, key string) (waiting, subscribed int) {
	if k.WakeState != nil {
		return k.WakeState(c, key)
	}
	ctx := context.Background()
	for _, n := range nodes {
		q, _ := n.ZCard(ctx, keys.Queue(key)).Result()
		waiting = max(waiting, int(q))
		if chs, _ := n.PubSubChannels(ctx, releasedChannel(key)+"#*").Result(); len(chs) > 0 {
			subscribed++
		}
	}
	return waiting, subscribed
}
