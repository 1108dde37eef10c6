package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Mutex is what the suite needs of a lock's mutex: *redlock.Mutex (which
// single.Mutex is).
type Mutex interface {
	Lock(ctx context.Context) (*redlock.Lease, error)
	TryLock(ctx context.Context) (*redlock.Lease, error)
	Do(ctx context.Context, fn func(ctx context.Context, l *redlock.Lease) error) error
}

// Setup describes the mutex a test wants.
type Setup struct {
	TTL         time.Duration
	NodeTimeout time.Duration          // 0: the package default
	NoRetry     bool                   // Lock makes one attempt
	Retry       func() backoff.BackOff // nil: the package default (unless NoRetry)
	NoWakeup    bool                   // WithWakeup(false)
	Clock       func() time.Time       // nil: time.Now
}

// Env is what a package under test provides.
type Env struct {
	// Nodes is how many redis-server processes the lock spans.
	Nodes int
	// NewMutex returns a mutex for key over clients with the given setup, on
	// a fresh lock Client that the test cleans up.
	NewMutex func(t *testing.T, clients []redis.UniversalClient, key string, s Setup) Mutex
	// NewClient returns a fresh lock Client over clients with the given setup
	// (Clock aside), closed when the test ends, for the wake-up tests.
	NewClient func(t *testing.T, clients []redis.UniversalClient, s Setup) Client
	// Polls says that a Lock waits by polling alone, never in the wake-up
	// queue (multi-key mutexes): the wake-up tests do not apply.
	Polls bool
	// SharedWakeState says that Client.WakeState reads the nodes, which show
	// every client's waiters and subscriptions, not only this one's.
	SharedWakeState bool
}

// Client is one lock Client under test.
type Client struct {
	// NewMutex returns a mutex for key on this Client.
	NewMutex func(t *testing.T, key string) Mutex
	// WakeState reports how many Lock calls of this Client wait for the full
	// key, and on how many nodes it has the key's release channel subscribed.
	WakeState func(key string) (waiting, subscribed int)
	// Close closes the Client (it is closed again when the test ends).
	Close func()
}

// Run runs the whole suite.
func Run(t *testing.T, env Env) {
	runTests(t, env, basicTests)
	runTests(t, env, lifecycleTests)
	if !env.Polls {
		runWakeup(t, env)
	}
	runHardening(t, env)
}

// basicTests are the tests of a mutex's acquire, extend and release, and of
// its exclusion.
var basicTests = []test[Env]{
	{"AcquireExcludesAndReleaseFrees", acquireRelease},
	{"ReleaseTwice", releaseTwice},
	{"ExtendRenewsTTL", extendRenews},
	{"ExtendAfterExpiryDoesNotResurrect", extendAfterExpiry},
	{"ExtendAfterKeyLossEndsLease", extendAfterKeyLoss},
	{"ReleaseAfterExpirySparesNewHolder", releaseAfterExpiry},
	{"ValidityBound", validityBound},
	{"NoLeaseWithoutValidity", noLeaseWithoutValidity},
	{"DoneClosesWhenValidityRunsOut", doneOnExpiry},
	{"CancelledContext", cancelledContext},
	{"LockWaitsForRelease", lockWaits},
	{"LockDeadlineWhileHeld", lockDeadline},
	{"MutualExclusionUnderContention", contention},
	{"ReleaseRacingExtend", releaseRacingExtend},
}

// test is one named test of a suite, run on an Env (Run) or a Kind (the
// RunX of each lock shape).
type test[E any] struct {
	name string
	run  func(t *testing.T, e E)
}

// runTests runs tests in order, each as a subtest of t named by its name.
func runTests[E any](t *testing.T, e E, tests []test[E]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
	}
}

func setupNodes(t *testing.T, env Env) []redis.UniversalClient {
	return redistest.Clients(t, redistest.Nodes(t, env.Nodes))
}

// fresh starts a test: its context, clients of fresh nodes and its own key.
func fresh(t *testing.T, env Env) (context.Context, []redis.UniversalClient, string) {
	return ctxT(t), setupNodes(t, env), redistest.Key(t)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// perNode returns read's answer from each of clients, in order, requiring
// no error.
func perNode[T any](t *testing.T, clients []redis.UniversalClient, read func(c redis.UniversalClient) (T, error)) []T {
	t.Helper()
	out := make([]T, len(clients))
	for i, c := range clients {
		v, err := read(c)
		require.NoError(t, err, "node %d", i)
		out[i] = v
	}
	return out
}

// holders returns, per node, the value stored at key ("" when absent).
func holders(t *testing.T, clients []redis.UniversalClient, key string) []string {
	t.Helper()
	return perNode(t, clients, func(c redis.UniversalClient) (string, error) {
		v, err := c.Get(context.Background(), key).Result()
		if errors.Is(err, redis.Nil) {
			return "", nil
		}
		return v, err
	})
}

func count(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// attempt is one way to ask for a lease: a Mutex's or RWMutex's TryLock,
// Lock, TryRLock or RLock.
type attempt = func(context.Context) (*redlock.Lease, error)

// take acquires m with TryLock, which must succeed.
func take(ctx context.Context, t *testing.T, m Mutex) *redlock.Lease {
	t.Helper()
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	return l
}

func majority(n int) int { return n/2 + 1 }

const longTTL = 10 * time.Second

func acquireRelease(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	a := take(ctx, t, m)
	assert.Equal(t, key, a.Key())
	assert.GreaterOrEqual(t, len(a.Value()), 22, "at least 16 random bytes, encoded")
	assert.Equal(t, fencing.Token(0), a.Token(), "no token without fencing")
	assert.GreaterOrEqual(t, count(holders(t, clients, key), a.Value()), majority(env.Nodes), "a majority holds the value")
	require.Eventually(t, func() bool { return count(holders(t, clients, key), a.Value()) == env.Nodes },
		5*time.Second, 5*time.Millisecond, "every healthy node holds the value")
	assert.Nil(t, a.Err())

	other := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	_, err := other.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "acquire", qe.Op)
	assert.Equal(t, 0, qe.Got)
	assert.Len(t, qe.Nodes, env.Nodes)
	assert.ErrorIs(t, err, redlock.ErrTaken, "contention is reported as such")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), a.Value()), "the failed attempt left the holder alone")

	require.NoError(t, a.Release(ctx))
	landedEverywhere(t, clients, key, "", "release removed every copy")
	b, err := other.TryLock(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, a.Value(), b.Value())
	require.NoError(t, b.Release(ctx))
}

func releaseTwice(t *testing.T, env Env) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	m := env.NewMutex(t, clients, redistest.Key(t), Setup{TTL: longTTL})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is not closed after Release")
	}
	assert.ErrorIs(t, l.Err(), redlock.ErrReleased)
	assert.ErrorIs(t, l.Release(ctx), redlock.ErrReleased)
	assert.ErrorIs(t, l.Extend(ctx), redlock.ErrReleased)
}

func extendRenews(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	l := take(ctx, t, m)
	first := l.ValidUntil()
	// Shorten the key's life on every node, then extend: the TTL must be back
	// near the full TTL, so the extend really reached the nodes.
	for _, c := range clients {
		require.NoError(t, c.PExpire(ctx, key, time.Second).Err())
	}
	require.NoError(t, l.Extend(ctx))
	extended := func() int {
		n := 0
		for _, c := range clients {
			pttl, err := c.PTTL(ctx, key).Result()
			require.NoError(t, err)
			if pttl > longTTL/2 {
				n++
			}
		}
		return n
	}
	assert.GreaterOrEqual(t, extended(), majority(env.Nodes), "a majority was extended when Extend returned")
	require.Eventually(t, func() bool { return extended() == env.Nodes }, 5*time.Second, 5*time.Millisecond,
		"the remaining nodes are extended too")
	assert.False(t, l.ValidUntil().Before(first), "validity never moves back")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), l.Value()))
	require.NoError(t, l.Release(ctx))
}

// waitDone waits for the lease to end, bounded by the test context.
func waitDone(t *testing.T, ctx context.Context, l *redlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease did not end before the test deadline")
	}
}
