package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/redistest"
)

// Lease is the method set shared by redlock.Lease and single.Lease.
type Lease interface {
	Key() string
	Value() string
	Token() fencing.Token
	ValidUntil() time.Time
	Extend(ctx context.Context) error
	Release(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	KeepAlive(ctx context.Context) error
	Context(parent context.Context) (context.Context, context.CancelFunc)
}

// Mutex is the method set shared by redlock.Mutex and single.Mutex: one
// interface, declared by its consumer, that fits both.
type Mutex[L Lease] interface {
	Lock(ctx context.Context) (L, error)
	TryLock(ctx context.Context) (L, error)
	Do(ctx context.Context, fn func(ctx context.Context, l L) error) error
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
type Env[L Lease] struct {
	// Nodes is how many redis-server processes the lock spans.
	Nodes int
	// NewMutex returns a mutex for key over clients with the given setup, on
	// a fresh lock Client that the test cleans up.
	NewMutex func(t *testing.T, clients []redis.UniversalClient, key string, s Setup) Mutex[L]
	// NewClient returns a fresh lock Client over clients with the given setup
	// (Clock aside), closed when the test ends, for the wake-up tests.
	NewClient func(t *testing.T, clients []redis.UniversalClient, s Setup) Client[L]
	// Unprobed skips the tests that watch the commands sent to a node with
	// a go-redis hook: set it when commands go through an AutoPipeliner,
	// which runs hooks apart from the round trip.
	Unprobed bool
}

// Client is one lock Client under test.
type Client[L Lease] struct {
	// NewMutex returns a mutex for key on this Client.
	NewMutex func(t *testing.T, key string) Mutex[L]
	// WakeState reports how many Lock calls of this Client wait for the full
	// key, and on how many nodes it has the key's release channel subscribed.
	WakeState func(key string) (waiting, subscribed int)
	// Close closes the Client (it is closed again when the test ends).
	Close func()
}

// Run runs the whole suite.
func Run[L Lease](t *testing.T, env Env[L]) {
	t.Run("AcquireExcludesAndReleaseFrees", func(t *testing.T) { acquireRelease(t, env) })
	t.Run("ReleaseTwice", func(t *testing.T) { releaseTwice(t, env) })
	t.Run("ExtendRenewsTTL", func(t *testing.T) { extendRenews(t, env) })
	t.Run("ExtendAfterExpiryDoesNotResurrect", func(t *testing.T) { extendAfterExpiry(t, env) })
	t.Run("ExtendAfterKeyLossEndsLease", func(t *testing.T) { extendAfterKeyLoss(t, env) })
	t.Run("ReleaseAfterExpirySparesNewHolder", func(t *testing.T) { releaseAfterExpiry(t, env) })
	t.Run("ValidityBound", func(t *testing.T) { validityBound(t, env) })
	t.Run("NoLeaseWithoutValidity", func(t *testing.T) { noLeaseWithoutValidity(t, env) })
	t.Run("DoneClosesWhenValidityRunsOut", func(t *testing.T) { doneOnExpiry(t, env) })
	t.Run("CancelledContext", func(t *testing.T) { cancelledContext(t, env) })
	t.Run("LockWaitsForRelease", func(t *testing.T) { lockWaits(t, env) })
	t.Run("LockDeadlineWhileHeld", func(t *testing.T) { lockDeadline(t, env) })
	t.Run("MutualExclusionUnderContention", func(t *testing.T) { contention(t, env) })
	t.Run("ReleaseRacingExtend", func(t *testing.T) { releaseRacingExtend(t, env) })
	runLifecycle(t, env)
	runWakeup(t, env)
	runHardening(t, env)
}

func setupNodes[L Lease](t *testing.T, env Env[L]) []redis.UniversalClient {
	return redistest.Clients(t, redistest.Nodes(t, env.Nodes))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// holders returns, per node, the value stored at key ("" when absent).
func holders(t *testing.T, clients []redis.UniversalClient, key string) []string {
	t.Helper()
	out := make([]string, len(clients))
	for i, c := range clients {
		v, err := c.Get(context.Background(), key).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		out[i] = v
	}
	return out
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

func majority(n int) int { return n/2 + 1 }

const longTTL = 10 * time.Second

func acquireRelease[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	a, err := m.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, key, a.Key())
	assert.GreaterOrEqual(t, len(a.Value()), 22, "at least 16 random bytes, encoded")
	assert.Equal(t, fencing.Token(0), a.Token(), "no token without fencing")
	assert.GreaterOrEqual(t, count(holders(t, clients, key), a.Value()), majority(env.Nodes), "a majority holds the value")
	require.Eventually(t, func() bool { return count(holders(t, clients, key), a.Value()) == env.Nodes },
		5*time.Second, 5*time.Millisecond, "every healthy node holds the value")
	assert.Nil(t, a.Err())

	other := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	_, err = other.TryLock(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	var qe *core.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "acquire", qe.Op)
	assert.Equal(t, 0, qe.Got)
	assert.Len(t, qe.Nodes, env.Nodes)
	assert.ErrorIs(t, err, core.ErrTaken, "contention is reported as such")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), a.Value()), "the failed attempt left the holder alone")

	require.NoError(t, a.Release(ctx))
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "release removed every copy")
	b, err := other.TryLock(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, a.Value(), b.Value())
	require.NoError(t, b.Release(ctx))
}

func releaseTwice[L Lease](t *testing.T, env Env[L]) {
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
	assert.ErrorIs(t, l.Err(), core.ErrReleased)
	assert.ErrorIs(t, l.Release(ctx), core.ErrReleased)
	assert.ErrorIs(t, l.Extend(ctx), core.ErrReleased)
}

func extendRenews[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
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
func waitDone[L Lease](t *testing.T, ctx context.Context, l L) {
	t.Helper()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease did not end before the test deadline")
	}
}

func extendAfterExpiry[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: 300 * time.Millisecond, NodeTimeout: 100 * time.Millisecond})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, l)
	// Let Redis expire the keys too (validity ends a little before the TTL).
	require.Eventually(t, func() bool { return count(holders(t, clients, key), "") == env.Nodes },
		10*time.Second, 10*time.Millisecond)
	err = l.Extend(ctx)
	require.ErrorIs(t, err, core.ErrLost)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "extend re-created no key")
	assert.ErrorIs(t, l.Release(ctx), core.ErrLost)
}

// The keys vanish while the lease is still valid by the client's clock (a
// restart, a flush): Extend must notice, not re-create them, and end the lease.
func extendAfterKeyLoss[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	// Let the requests still in flight after the early decision land first.
	require.Eventually(t, func() bool { return count(holders(t, clients, key), l.Value()) == env.Nodes },
		5*time.Second, 5*time.Millisecond)
	lose := env.Nodes - majority(env.Nodes) + 1 // just enough that no majority holds it
	for i := 0; i < lose; i++ {
		require.NoError(t, clients[i].Del(ctx, key).Err())
	}
	err = l.Extend(ctx)
	require.ErrorIs(t, err, core.ErrLost)
	assert.ErrorIs(t, err, core.ErrNotHeld)
	assert.ErrorIs(t, l.Err(), core.ErrLost)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is not closed after a lost extend")
	}
	for i := 0; i < lose; i++ {
		assert.Equal(t, "", holders(t, clients, key)[i], "node %d: key not re-created", i)
	}
	assert.ErrorIs(t, l.Release(ctx), core.ErrLost)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "release still removed what remained")
}

func releaseAfterExpiry[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	a, err := env.NewMutex(t, clients, key, Setup{TTL: 300 * time.Millisecond, NodeTimeout: 100 * time.Millisecond}).TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, a)
	mb := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	var b L
	require.Eventually(t, func() bool {
		b, err = mb.TryLock(ctx)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "B acquires once A's keys expire")
	assert.ErrorIs(t, a.Release(ctx), core.ErrLost)
	assert.GreaterOrEqual(t, count(holders(t, clients, key), b.Value()), majority(env.Nodes), "A's release deleted nothing of B's")
	require.NoError(t, b.Release(ctx))
}

// recorder is a clock that remembers its readings.
type recorder struct {
	mu       sync.Mutex
	readings []time.Time
}

func (r *recorder) now() time.Time {
	t := time.Now()
	r.mu.Lock()
	r.readings = append(r.readings, t)
	r.mu.Unlock()
	return t
}

func (r *recorder) take() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.readings
	r.readings = nil
	return out
}

// The lease's validity is exactly TTL - elapsed - drift at the moment the
// acquire decided (elapsed from the clock reading taken before the first
// request), is positive when returned, and never outlasts the key on any node.
func validityBound[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	const ttl = 2 * time.Second
	drift := time.Duration(float64(ttl)*core.DefaultDrift) + core.ExtraDrift
	var clock recorder
	m := env.NewMutex(t, clients, key, Setup{TTL: ttl, Clock: clock.now})
	for i := 0; i < 20; i++ {
		l, err := m.TryLock(ctx)
		after := time.Now()
		require.NoError(t, err)
		r := clock.take()
		require.Len(t, r, 2, "one reading before sending, one at the decision")
		start, decided := r[0], r[1]
		remaining := l.ValidUntil().Sub(decided)
		assert.Equal(t, ttl-decided.Sub(start)-drift, remaining, "validity = TTL - elapsed - drift")
		assert.True(t, l.ValidUntil().After(after), "a returned lease has positive validity")
		for j, c := range clients {
			pttl, err := c.PTTL(ctx, key).Result()
			read := time.Now()
			require.NoError(t, err)
			if pttl < 0 {
				continue // a straggling node not yet written; it holds nothing to outlast
			}
			// PTTL truncates to the millisecond.
			assert.False(t, read.Add(pttl+time.Millisecond).Before(l.ValidUntil()),
				"node %d's key expires before the lease's validity ends", j)
		}
		require.NoError(t, l.Release(ctx))
	}
}

// A clock that jumps by the TTL between sending and deciding: the quorum is
// reached but no validity is left, so no lease may be returned and the keys
// taken must be released.
func noLeaseWithoutValidity[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	const ttl = time.Second
	var mu sync.Mutex
	var calls int
	base := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls%2 == 0 { // every second reading is one TTL later
			return base.Add(ttl - core.ExtraDrift)
		}
		return base
	}
	m := env.NewMutex(t, clients, key, Setup{TTL: ttl, Clock: clock, NoRetry: true})
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.Contains(t, err.Error(), "no validity")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "the keys taken were released")
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired, "Lock with no retries fails the same way")
}

func doneOnExpiry[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	l, err := env.NewMutex(t, clients, redistest.Key(t), Setup{TTL: 200 * time.Millisecond, NodeTimeout: 80 * time.Millisecond}).TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, l)
	assert.False(t, time.Now().Before(l.ValidUntil()), "Done closed no earlier than ValidUntil")
	assert.ErrorIs(t, l.Err(), core.ErrLost)
}

func cancelledContext[L Lease](t *testing.T, env Env[L]) {
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""))
}

func lockWaits[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	a, err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).TryLock(ctx)
	require.NoError(t, err)
	mb := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	type result struct {
		l   L
		err error
	}
	got := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		l, err := mb.Lock(ctx)
		got <- result{l, err}
	}()
	<-started
	require.NoError(t, a.Release(ctx))
	r := <-got
	require.NoError(t, r.err)
	assert.GreaterOrEqual(t, count(holders(t, clients, key), r.l.Value()), majority(env.Nodes), "B holds the lock after A released")
	require.NoError(t, r.l.Release(ctx))
}

func lockDeadline[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	a, err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).TryLock(ctx)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = env.NewMutex(t, clients, key, Setup{TTL: longTTL}).Lock(short)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var qe *core.QuorumError
	assert.ErrorAs(t, err, &qe, "the last attempt's node replies are kept")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), a.Value()), "A still holds everything")
	require.NoError(t, a.Release(ctx))
}

// Several workers contend for one key. Under the lock each does a
// read-modify-write of a counter that is not atomic on its own (GET, then
// SET+1), and records the interval in which it believed it held the lock
// (acquire returned -> release called). No two intervals may overlap, no
// increment may be lost, and every worker must get the lock.
func contention[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	counter := key + ":counter"
	const workers, rounds = 4, 8
	type span struct {
		worker     int
		start, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	work := func() error {
		v, err := clients[0].Get(ctx, counter).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return clients[0].Set(ctx, counter, v+1, 0).Err()
	}
	for w := 0; w < workers; w++ {
		m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				s := span{worker: w, start: time.Now()}
				err = work()
				s.end = time.Now()
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, spans, workers*rounds)
	total, err := clients[0].Get(ctx, counter).Int()
	require.NoError(t, err)
	assert.Equal(t, workers*rounds, total, "no increment was lost")
	perWorker := map[int]int{}
	for i := range spans {
		perWorker[spans[i].worker]++
		for j := i + 1; j < len(spans); j++ {
			a, b := spans[i], spans[j]
			overlap := a.start.Before(b.end) && b.start.Before(a.end)
			assert.False(t, overlap, "workers %d and %d held the lock at once", a.worker, b.worker)
		}
	}
	assert.Len(t, perWorker, workers)
}

func releaseRacingExtend[L Lease](t *testing.T, env Env[L]) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	key := redistest.Key(t)
	l, err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).TryLock(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	extendErrs := make([]error, 8)
	for i := range extendErrs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			extendErrs[i] = l.Extend(ctx)
		}(i)
	}
	relErr := l.Release(ctx)
	wg.Wait()
	require.NoError(t, relErr)
	for _, err := range extendErrs {
		if err != nil {
			assert.ErrorIs(t, err, core.ErrReleased)
		}
	}
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "no extend outlived the release")
	assert.ErrorIs(t, l.Err(), core.ErrReleased)
}
