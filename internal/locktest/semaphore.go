package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// RunSemaphore runs the tests of the counting semaphore (NewSemaphore) for
// kind k; docs/shapes.md names them as the evidence of its guarantees.
func RunSemaphore(t *testing.T, k Kind) {
	runTests(t, k, semTests)
	if k.Nodes == 5 {
		runTests(t, k, []test[Kind]{
			{"MajorityCounterExample", semMajorityCounterExample},
			{"QuorumSubsetsAdmitAtMostPermits", semQuorumSubsets},
		})
	}
}

// semTests are the tests of a semaphore on every kind.
var semTests = []test[Kind]{
	{"AdmitsExactlyPermits", semExactly},
	{"NeverMorePermitsUnderContention", semContention},
	{"CrashedHolderFreesPermitAfterTTL", semCrashedHolder},
	{"ExtendAfterRemovalEndsLease", semExtendAfterRemoval},
	{"ReleaseRemovesOnlyOurs", semReleaseOnlyOurs},
	{"Lifecycle", semLifecycle},
	{"CloseDuringAcquire", func(t *testing.T, k Kind) { closeDuringWait(t, k, closeAcquire) }},
	{"BadInput", semBadInput},
	{"RestartQuarantineApplies", semQuarantine},
}

// semFresh starts a semaphore test: its context, the clients of fresh
// nodes, a Client of kind k with o (TTL longTTL unless o says otherwise) and
// a key of its own.
func semFresh(t *testing.T, k Kind, o ...redlock.Option) (context.Context, []redis.UniversalClient, *redlock.Client, string) {
	t.Helper()
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.client(t, clients, opts([]redlock.Option{redlock.WithTTL(longTTL)}, o)...)
	return ctxT(t), clients, c, redistest.Key(t)
}

// sem returns c's semaphore of permits on key.
func sem(t *testing.T, c *redlock.Client, key string, permits int, o ...redlock.Option) *Sem {
	t.Helper()
	s, err := NewSem(c, key, permits, o...)
	require.NoError(t, err)
	return s
}

// members returns, per node, how many holders the semaphore at key records.
func members(t *testing.T, clients []redis.UniversalClient, key string) []int64 {
	t.Helper()
	return perNode(t, clients, func(c redis.UniversalClient) (int64, error) {
		return c.ZCard(context.Background(), key).Result()
	})
}

func semExactly(t *testing.T, k Kind) {
	ctx, clients, c, key := semFresh(t, k)
	s := sem(t, c, key, 3)
	var ls []*redlock.Lease
	for i := 0; i < 3; i++ {
		l, err := s.TryAcquire(ctx)
		require.NoError(t, err, "permit %d", i)
		ls = append(ls, l)
	}
	_, err := s.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a fourth holder of three permits")
	assert.ErrorIs(t, err, redlock.ErrTaken)
	for i, n := range members(t, clients, s.Key()) {
		assert.LessOrEqual(t, n, int64(3), "node %d records the refused holder", i)
	}
	require.NoError(t, ls[0].Release(ctx))
	l, err := s.TryAcquire(ctx)
	require.NoError(t, err, "a released permit is free again")
	for _, l := range append(ls[1:], l) {
		require.NoError(t, l.Release(ctx))
	}
}

// semContention: six goroutines on two Clients take a semaphore of two
// permits 36 times in all; a shared count of holders never exceeds two, and
// no node ever records more than two holders while one holds.
func semContention(t *testing.T, k Kind) {
	const permits, workers, rounds = 2, 6, 6
	ctx, clients, c1, key := semFresh(t, k)
	c2 := k.client(t, clients, redlock.WithTTL(longTTL))
	retry := redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) })
	var holding, most, taken atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		c := c1
		if w%2 == 1 {
			c = c2
		}
		s := sem(t, c, key, permits, retry)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := s.Acquire(ctx)
				if !assert.NoError(t, err) {
					return
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				assert.LessOrEqual(t, n, int32(permits), "holders at once")
				for i, got := range members(t, clients, s.Key()) {
					assert.LessOrEqual(t, got, int64(permits), "node %d records more holders than permits", i)
				}
				taken.Add(1)
				holding.Add(-1)
				assert.NoError(t, l.Release(ctx))
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, workers*rounds, taken.Load())
	assert.LessOrEqual(t, most.Load(), int32(permits))
}

// semCrashedHolder: of two holders, one keeps its lease (extending it) and
// the other crashes (never releases, never extends); a third Acquire gets
// the crashed holder's permit once its TTL has run out on the nodes, while
// the first still holds.
func semCrashedHolder(t *testing.T, k Kind) {
	ctx, clients, c, key := semFresh(t, k)
	live := sem(t, c, key, 2)
	short := sem(t, c, key, 2, redlock.WithTTL(300*time.Millisecond),
		redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }))
	a := takeSem(ctx, t, live)
	crashed, err := short.TryAcquire(ctx)
	require.NoError(t, err)
	_, err = short.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "both permits are held")
	<-crashed.Done() // its validity ran out: the crashed holder's permit frees on the nodes at its TTL
	// Once every node's clock is past the crashed member's expiry, one
	// attempt is enough: the acquire script itself drops expired members
	// (a failed attempt's cleanup would also drop them, and hide it).
	require.Eventually(t, func() bool { return expiredEverywhere(t, clients, key, crashed.Value()) },
		10*time.Second, 10*time.Millisecond)
	l, err := short.TryAcquire(ctx)
	require.NoError(t, err, "the crashed holder's permit is free after its TTL, at the first attempt")
	require.NoError(t, a.Extend(ctx), "the live holder still holds")
	for i, n := range members(t, clients, live.Key()) {
		assert.LessOrEqual(t, n, int64(2), "node %d", i)
	}
	require.NoError(t, l.Release(ctx))
	require.NoError(t, a.Release(ctx))
}

// expiredEverywhere reports whether member's expiry in the semaphore at key
// (its score, ms on the node's clock) has come on every node that records it.
func expiredEverywhere(t *testing.T, clients []redis.UniversalClient, key, member string) bool {
	t.Helper()
	for i, c := range clients {
		score, err := c.ZScore(context.Background(), key, member).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err, "node %d", i)
		now, err := c.Time(context.Background()).Result()
		require.NoError(t, err, "node %d", i)
		if float64(now.UnixMilli()) <= score {
			return false
		}
	}
	return true
}

// takeSem acquires a permit of s, failing the test otherwise.
func takeSem(ctx context.Context, t *testing.T, s *Sem) *redlock.Lease {
	t.Helper()
	l, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	return l
}

// semExtendAfterRemoval: the holder's member is removed on every node;
// Extend reports the lease lost and does not add it back.
func semExtendAfterRemoval(t *testing.T, k Kind) {
	ctx, clients, c, key := semFresh(t, k)
	s := sem(t, c, key, 2)
	l := takeSem(ctx, t, s)
	// The acquire returned on a quorum; its writes to the other nodes may
	// still be on the way, and one landing after the removal would be seen
	// as Extend's.
	require.Eventually(t, func() bool {
		for _, n := range members(t, clients, s.Key()) {
			if n != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the member reached every node")
	for _, cl := range clients {
		require.NoError(t, cl.Del(ctx, s.Key()).Err())
	}
	err := l.Extend(ctx)
	require.ErrorIs(t, err, redlock.ErrLost)
	require.ErrorIs(t, l.Err(), redlock.ErrLost)
	for i, n := range members(t, clients, s.Key()) {
		assert.Zero(t, n, "node %d: Extend re-added the member", i)
	}
}

// semReleaseOnlyOurs: of two holders, one releases; the other's member stays
// on every node, and it can still extend.
func semReleaseOnlyOurs(t *testing.T, k Kind) {
	ctx, clients, c, key := semFresh(t, k)
	s := sem(t, c, key, 2)
	a, b := takeSem(ctx, t, s), takeSem(ctx, t, s)
	require.NoError(t, a.Release(ctx))
	landed(t, func() bool { // Release returns at a quorum; its last deletes land a moment later
		return !slices.ContainsFunc(members(t, clients, s.Key()), func(n int64) bool { return n > 1 })
	}, "a's member gone from every node")
	kept := 0
	for i, n := range members(t, clients, s.Key()) {
		assert.LessOrEqual(t, n, int64(1), "node %d", i)
		kept += int(n)
	}
	assert.GreaterOrEqual(t, kept, semQuorum(k.Nodes, 2), "the other holder stays on a quorum of nodes")
	require.NoError(t, b.Extend(ctx))
	require.NoError(t, b.Release(ctx))
	landed(t, func() bool {
		return !slices.ContainsFunc(members(t, clients, s.Key()), func(n int64) bool { return n != 0 })
	}, "every member gone from every node")
}

// semLifecycle: Do holds a permit while fn runs and frees it after; Context
// ends with the lease; a second Release says ErrReleased.
func semLifecycle(t *testing.T, k Kind) {
	ctx, clients, c, key := semFresh(t, k)
	s := sem(t, c, key, 1)
	ran := false
	require.NoError(t, s.Do(ctx, func(ctx context.Context, l *redlock.Lease) error {
		ran = true
		assert.NoError(t, l.Err())
		_, err := s.TryAcquire(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotAcquired, "the one permit is Do's")
		return nil
	}))
	assert.True(t, ran)
	l := takeSem(ctx, t, s)
	lctx, cancel := l.Context(ctx)
	defer cancel()
	require.NoError(t, l.Release(ctx))
	<-lctx.Done()
	assert.ErrorIs(t, context.Cause(lctx), redlock.ErrReleased)
	assert.ErrorIs(t, l.Release(ctx), redlock.ErrReleased)
	landed(t, func() bool {
		return !slices.ContainsFunc(members(t, clients, s.Key()), func(n int64) bool { return n != 0 })
	}, "no member left on any node")
}

func semBadInput(t *testing.T, k Kind) {
	_, _, c, key := semFresh(t, k)
	for name, f := range map[string]func() error{
		"ZeroPermits":     func() error { _, err := NewSem(c, key, 0); return err },
		"NegativePermits": func() error { _, err := NewSem(c, key, -1); return err },
		"AbsurdPermits":   func() error { _, err := NewSem(c, key, maxPermits+1); return err },
		"EmptyKey":        func() error { _, err := NewSem(c, "", 2); return err },
		"ReservedKey":     func() error { _, err := NewSem(c, "redfence:node", 2); return err },
		"Fencing":         func() error { _, err := NewSem(c, key, 2, redlock.WithFencing()); return err },
	} {
		var ce *redlock.ConfigError
		assert.ErrorAs(t, f(), &ce, name)
	}
	_, err := NewSem(c, key, maxPermits)
	assert.NoError(t, err, "MaxPermits itself")
}

// semQuarantine: new, unvouched nodes refuse an acquire with ErrQuarantined
// and record nothing; once vouched for, they admit it.
func semQuarantine(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.unvouched(t, clients, opts(k.quarantineOn(), []redlock.Option{redlock.WithTTL(longTTL)})...)
	s := sem(t, c, redistest.Key(t), 2)
	_, err := s.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrQuarantined)
	for i, n := range members(t, clients, s.Key()) {
		assert.Zero(t, n, "node %d", i)
	}
	require.NoError(t, c.Vouch(ctx))
	l := takeSem(ctx, t, s)
	require.NoError(t, l.Release(ctx))
}

// reaching returns clients with every node outside reach replaced by a
// client of an address where nothing listens: a holder that reaches only
// the nodes in reach.
func reaching(t *testing.T, clients []redis.UniversalClient, reach ...int) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(clients))
	for i := range out {
		out[i] = redistest.Client(t, fmt.Sprintf("127.0.0.1:%d", i+1)) // ports below 1024: nothing listens
	}
	for _, i := range reach {
		out[i] = clients[i]
	}
	return out
}

// semAcquireVia makes one acquire of a semaphore of permits on key by a
// Client that reaches only the nodes in reach (quarantine off: the
// unreachable nodes cannot be vouched for), and returns its lease or nil.
func semAcquireVia(ctx context.Context, t *testing.T, k Kind, clients []redis.UniversalClient, key string, permits int, reach ...int) *redlock.Lease {
	t.Helper()
	c := k.unvouched(t, reaching(t, clients, reach...), opts(k.quarantineOff(), []redlock.Option{redlock.WithTTL(longTTL)})...)
	l, err := sem(t, c, key, permits).TryAcquire(ctx)
	if err != nil {
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		return nil
	}
	return l
}

// semMajorityCounterExample: five nodes, two permits. Three holders reach
// {0,1,2}, {2,3,4} and {0,1,3}: no node is asked by more than two of them, so
// every node admits every holder that reaches it, and a majority (3 of 5)
// would make all three holders valid at once. The semaphore's quorum (4)
// admits none of them, and never more than two.
func semMajorityCounterExample(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	key := redistest.Key(t)
	held := 0
	for _, reach := range [][]int{{0, 1, 2}, {2, 3, 4}, {0, 1, 3}} {
		if l := semAcquireVia(ctx, t, k, clients, key, 2, reach...); l != nil {
			held++
		}
	}
	assert.LessOrEqual(t, held, 2, "holders of two permits at once")
	assert.Zero(t, held, "a holder reaching 3 of 5 nodes is below the quorum of 4")
}

// semQuorumSubsets: five nodes, two permits, three holders each reaching a
// quorum-sized set (4 nodes): {0,1,2,3}, {0,1,2,4}, {1,2,3,4}. The first two
// are admitted; the third finds nodes 1 and 2 full and only two admissions
// remain: it fails, as the pigeonhole argument says it must.
func semQuorumSubsets(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	key := redistest.Key(t)
	var held []*redlock.Lease
	for _, reach := range [][]int{{0, 1, 2, 3}, {0, 1, 2, 4}, {1, 2, 3, 4}} {
		if l := semAcquireVia(ctx, t, k, clients, key, 2, reach...); l != nil {
			held = append(held, l)
		}
	}
	assert.Len(t, held, 2, "holders of two permits")
	for i, n := range members(t, clients, key) {
		assert.LessOrEqual(t, n, int64(2), "node %d", i)
	}
}
