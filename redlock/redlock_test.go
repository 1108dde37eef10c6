package redlock_test

import (
	"context"
	"errors"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// lockOnce takes m and releases it.
func lockOnce(ctx context.Context, t *testing.T, m *redlock.Mutex, msgAndArgs ...any) {
	t.Helper()
	l, err := m.TryLock(ctx)
	require.NoError(t, err, msgAndArgs...)
	require.NoError(t, l.Release(ctx), msgAndArgs...)
}

// pause stops nodes (SIGSTOP) and resumes them when the test ends, if the
// test has not.
func pause(t *testing.T, nodes []*redisnode.Node) {
	t.Helper()
	for _, n := range nodes {
		require.NoError(t, n.Pause())
		t.Cleanup(func() { _ = n.Resume() })
	}
}

// requireGaveUp asserts that err is a failed acquire that ended with its
// context's deadline.
func requireGaveUp(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotAcquired, msgAndArgs...)
	assert.ErrorIs(t, err, context.DeadlineExceeded, msgAndArgs...)
}

// mutex returns c's mutex for key.
func mutex(t *testing.T, c *redlock.Client, key string) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	return m
}

// failedTryLock makes one TryLock with m, which must fail with
// ErrNotAcquired, and returns its error.
func failedTryLock(ctx context.Context, t *testing.T, m *redlock.Mutex) error {
	t.Helper()
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	return err
}

func exists(t *testing.T, c redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := c.Exists(context.Background(), key).Result()
	require.NoError(t, err)
	return n == 1
}

func get(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// landedEverywhere waits, bounded, until every node holds v under key ("":
// none): a lock or release returns once a majority has answered, and its
// requests land on the other nodes within the node timeout.
func landedEverywhere(t *testing.T, clients []redis.UniversalClient, key, v string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range clients {
			if got, err := c.Get(context.Background(), key).Result(); (err != nil && !errors.Is(err, redis.Nil)) || got != v {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "%s on every node", key)
}

func TestNewValidation(t *testing.T) {
	nodes := redistest.Nodes(t, 2)
	a := redistest.Client(t, nodes[0].Addr())
	b := redistest.Client(t, nodes[1].Addr())
	sameAddr := redistest.Client(t, nodes[0].Addr())
	var nilClient *redis.Client
	ab := []redis.UniversalClient{a, b}
	locktest.NewRefuses(t, kind(2), "redlock: ", []locktest.ConfigCase{
		locktest.Refused("no clients", "no Redis clients", nil),
		locktest.Refused("nil interface", "client 1 is nil", []redis.UniversalClient{a, nil}),
		locktest.Refused("typed nil", "client 0 is nil", []redis.UniversalClient{nilClient, a}),
		locktest.Refused("same client", "clients 0 and 2 are the same client", []redis.UniversalClient{a, b, a}),
		locktest.Refused("same address", "same address", []redis.UniversalClient{a, sameAddr}),
		locktest.Refused("zero TTL", "TTL: must be positive", ab, redlock.WithTTL(0)),
		locktest.Refused("negative TTL", "TTL: must be positive", ab, redlock.WithTTL(-time.Second)),
		locktest.Refused("tiny TTL", "at least 10ms", ab, redlock.WithTTL(time.Millisecond)),
		locktest.Refused("zero drift", "drift factor", ab, redlock.WithDriftFactor(0)),
		locktest.Refused("big drift", "drift factor", ab, redlock.WithDriftFactor(0.1)),
		locktest.Refused("NaN drift", "drift factor", ab, redlock.WithDriftFactor(math.NaN())),
		locktest.Refused("zero node timeout", "node timeout: must be positive", ab, redlock.WithNodeTimeout(0)),
		locktest.Refused("node timeout half TTL", "below half the TTL", ab, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(500*time.Millisecond)),
		locktest.Refused("nil retry", "retry", ab, redlock.WithRetry(nil)),
	})

	c, err := redlock.New([]redis.UniversalClient{a, b}, redlock.WithTTL(time.Second))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.NewMutex("")
	assert.ErrorContains(t, err, "key: empty")
	_, err = c.NewMutex("k", redlock.WithNodeTimeout(time.Second))
	assert.ErrorContains(t, err, "below half the TTL", "overrides are validated against the client's TTL")
	m, err := c.NewMutex("k", redlock.WithKeyPrefix("app:"), nil)
	require.NoError(t, err, "a nil option is ignored")
	assert.Equal(t, "app:k", m.Key())
}

// TestRefusedEverywhereSendsNoCleanup: an attempt every node refused as
// taken wrote nothing, so it sends no clean-up (the release script); one
// that some node granted deletes its value there (TestEveryOccupiedSubset).
func TestRefusedEverywhereSendsNoCleanup(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	c := newClient(t, clients, redlock.WithQuarantine(0), redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	for _, occupied := range []int{3, 2} {
		key := redistest.Key(t)
		for i, cl := range clients {
			if i < occupied {
				require.NoError(t, cl.Set(ctx, key, "foreign", 10*time.Second).Err())
			}
		}
		resetStats(t, clients)
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		scripts := callsOn(t, clients, "evalsha")
		if occupied == len(clients) {
			assert.Zero(t, scripts, "no clean-up after a refusal everywhere")
		} else {
			assert.Equal(t, len(clients), scripts, "a clean-up on every node after a write landed on one")
		}
	}
}

// resetStats resets the command statistics of every node.
func resetStats(t *testing.T, clients []redis.UniversalClient) {
	t.Helper()
	for _, cl := range clients {
		require.NoError(t, cl.ConfigResetStat(t.Context()).Err())
	}
}

// callsOn returns how often the nodes ran cmd since their stats were reset.
func callsOn(t *testing.T, clients []redis.UniversalClient, cmd string) int {
	t.Helper()
	n := 0
	for _, cl := range clients {
		n += commandCalls(t, cl, cmd)
	}
	return n
}

// commandCalls returns how often cl's server ran cmd since its stats were reset.
func commandCalls(t *testing.T, cl redis.UniversalClient, cmd string) int {
	t.Helper()
	info, err := cl.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// Every subset of the 5 nodes is pre-occupied by another owner: TryLock
// succeeds exactly when at least 3 nodes are free, the occupied nodes keep
// their owner's value, and after a failure no node holds our value.
func TestEveryOccupiedSubset(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 5))
	c := newClient(t, clients, redlock.WithTTL(10*time.Second), redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	for mask := 0; mask < 1<<5; mask++ {
		key := redistest.Key(t)
		free := 0
		for i, cl := range clients {
			if mask&(1<<i) != 0 {
				require.NoError(t, cl.Set(ctx, key, "foreign", 10*time.Second).Err())
			} else {
				free++
			}
		}
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		l, err := m.TryLock(ctx)
		if free >= 3 {
			require.NoError(t, err, "mask %05b", mask)
		} else {
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "mask %05b", mask)
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			assert.Equal(t, free, qe.Got, "mask %05b", mask)
			assert.Equal(t, 3, qe.Need)
			assert.ErrorIs(t, err, redlock.ErrTaken)
		}
		if l != nil {
			// Requests still in flight after the early decision land shortly.
			require.Eventually(t, func() bool {
				held := 0
				for _, cl := range clients {
					if get(t, cl, key) == l.Value() {
						held++
					}
				}
				return held == free
			}, 5*time.Second, 5*time.Millisecond, "mask %05b", mask)
		}
		for i, cl := range clients {
			v := get(t, cl, key)
			switch {
			case mask&(1<<i) != 0:
				assert.Equal(t, "foreign", v, "mask %05b node %d: the other owner's key is untouched", mask, i)
			case l != nil:
				assert.Equal(t, l.Value(), v, "mask %05b node %d", mask, i)
			default:
				assert.Equal(t, "", v, "mask %05b node %d: nothing left behind", mask, i)
			}
		}
		if l != nil {
			require.NoError(t, l.Release(ctx))
			for i, cl := range clients {
				if mask&(1<<i) == 0 { // Release returns at a majority; its last deletes land a moment later
					require.Eventually(t, func() bool { return !exists(t, cl, key) }, 5*time.Second, time.Millisecond, "mask %05b node %d released", mask, i)
				}
			}
		}
	}
}

// plainClients returns a client per node that ignores context deadlines on
// socket I/O (go-redis's default), so only redlock's own per-node timeout
// bounds a call to a hung node.
func plainClients(t *testing.T, nodes []*redisnode.Node) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, ReadTimeout: 3 * time.Second})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients
}

// A hung node (SIGSTOP) costs an acquire at most about the per-node timeout,
// even through clients that ignore context deadlines: the Lock must not wait
// for the client's 3s read timeout.
func TestHungMinority(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 5)
	clients := plainClients(t, nodes)
	c := newClient(t, clients, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	// Warm the connections so that the paused node is hung mid-request, not
	// mid-dial.
	lockOnce(ctx, t, m)

	pause(t, nodes[4:])
	start := time.Now()
	l, err := m.TryLock(ctx)
	took := time.Since(start)
	require.NoError(t, err)
	assert.Less(t, took, 2*time.Second, "one hung node must not hold the acquire to the client's read timeout")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, nodes[4].Resume())
}

// A majority hung: ErrNotAcquired within the context deadline, the healthy
// nodes hold nothing afterwards, and whatever lands late on the hung nodes
// expires with the TTL.
func TestHungMajority(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 5)
	clients := plainClients(t, nodes)
	const ttl = time.Second
	c := newClient(t, clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	pause(t, nodes[:3])
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = m.Lock(lctx)
	requireGaveUp(t, err)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Less(t, qe.Got, 3)
	check := redistest.Clients(t, nodes)
	for i := 3; i < 5; i++ {
		assert.False(t, exists(t, check[i], key), "healthy node %d holds nothing", i)
	}
	for _, n := range nodes[:3] {
		require.NoError(t, n.Resume())
	}
	require.Eventually(t, func() bool {
		for _, cl := range check {
			if exists(t, cl, key) {
				return false
			}
		}
		return true
	}, 10*ttl, 20*time.Millisecond, "late writes on the resumed nodes expire with the TTL")
}

// The context ends while the nodes already taken wait for a decision: those
// nodes are released before TryLock returns.
func TestCancelMidAcquireReleasesTakenNodes(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	c := newClient(t, clients, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(2*time.Second))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	pause(t, nodes[2:])
	// Nodes 0 and 1 grant at once; 2-4 hang, so the round waits on them until
	// the context ends well before the 2s node timeout.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = m.TryLock(short)
	requireGaveUp(t, err)
	assert.False(t, exists(t, clients[0], key), "node 0 was released")
	assert.False(t, exists(t, clients[1], key), "node 1 was released")
	for _, n := range nodes[2:] {
		require.NoError(t, n.Resume())
	}
}

// Nodes that are not Redis: one answers every request with garbage, one
// accepts connections and never answers. With three real nodes the lock still
// works; the errors name the bad nodes.
func TestBadNodes(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	garbage := fakeServer(t, func(c net.Conn) {
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write([]byte("?this is not RESP\r\n")); err != nil {
				return
			}
		}
	})
	silent := fakeServer(t, func(c net.Conn) {
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	clients := append(redistest.Clients(t, nodes), redistest.Client(t, garbage), redistest.Client(t, silent))
	// Vouch vouches for no node while one cannot be asked: vouch for the
	// real nodes on their own.
	require.NoError(t, newClient(t, clients[:3]).Vouch(ctx))
	c := newClient(t, clients, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err, "three real nodes of five are a quorum")
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))

	// Occupy one real node: now only two real nodes are free, and the bad
	// nodes must count as failures, not votes.
	require.NoError(t, clients[0].Set(ctx, key, "foreign", 5*time.Second).Err())
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, 2, qe.Got)
	var bad []int
	for _, ne := range qe.Nodes {
		bad = append(bad, ne.Index)
	}
	assert.Equal(t, []int{0, 3, 4}, bad)
	assert.ErrorIs(t, qe.Nodes[0], redlock.ErrTaken)
	assert.Contains(t, qe.Nodes[1].Error(), garbage)
	assert.Equal(t, "foreign", get(t, clients[0], key))
	assert.False(t, exists(t, clients[1], key))
	assert.False(t, exists(t, clients[2], key))
}

// fakeServer listens on loopback and serves each connection with handle
// until the test ends.
func fakeServer(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	conns := make(chan net.Conn, 64)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go handle(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
