package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testclock"
	"github.com/redfence/redfence/redlock"
)

// countingHour waits an hour between attempts and counts them.
type countingHour struct{ calls atomic.Int32 }

func (h *countingHour) NextBackOff() time.Duration { h.calls.Add(1); return time.Hour }
func (h *countingHour) Reset()                     {}

// A split that persists (keys left on a majority of the nodes by other
// owners, none of them on a majority, as crashed contenders leave them)
// does not make Lock spin: it takes the free nodes, joins the queues of the
// others and waits for its poll (an hour) or a grant; only the
// subscription's confirmations make it look again, without counting as
// attempts of its policy. Giving up, it leaves the queues and the nodes.
func TestPersistentSplitDoesNotSpin(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 5))
	h := &countingHour{}
	c := newClient(t, clients, redlock.WithTTL(10*time.Second), redlock.WithRetry(func() backoff.BackOff { return h }))
	key := redistest.Key(t)
	for i, owner := range []string{"x", "x", "y"} {
		require.NoError(t, clients[i].Set(ctx, key, owner, time.Minute).Err())
	}
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Lock(lctx)
		done <- err
	}()
	require.Eventually(t, func() bool { _, s := redlock.WakeState(c, key); return s == 5 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		for i, cl := range clients {
			if i < 3 && cl.ZCard(ctx, "{"+key+"}:queue").Val() != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "queued on the nodes the others hold")
	// Any further attempt would come an hour later, so this window cannot
	// fail a correct Lock, however slow the machine; it gives a spinning one
	// time to show.
	assert.Never(t, func() bool { return h.calls.Load() > 1 }, 200*time.Millisecond, 5*time.Millisecond,
		"one delay drawn: the first attempt's")
	cancel()
	err = <-done
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), h.calls.Load())
	for i, cl := range clients {
		assert.Zero(t, cl.Exists(ctx, "{"+key+"}:queue").Val(), "node %d: the waiter left the queue", i)
		if i >= 3 {
			assert.Zero(t, cl.Exists(ctx, key).Val(), "node %d: the waiter gave up the grant it held", i)
		}
	}
}

// hourRetry is a retry policy whose polls never come within a test: a
// queued Lock waits on its grants alone.
func hourRetry() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }

// queuedOnAll waits until every node's queue of key holds n waiters.
func queuedOnAll(t *testing.T, clients []redis.UniversalClient, key string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range clients {
			if c.ZCard(context.Background(), "{"+key+"}:queue").Val() != n {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "%d waiters queued on every node", n)
}

// A lease made of grants is valid from the start of the round whose entry
// each node granted, not from when the grants arrive: a node sets the key
// for the TTL when it grants it, after that round reached it, so the key
// lives at least until that start + TTL (docs/design.md, Waiting). B queues
// at a clock reading T0; the release comes 10s later by B's clock; the
// lease B gets is valid until T0 + TTL - drift.
func TestGrantValidityCountsFromTheRound(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 5))
	const ttl = 30 * time.Second
	a := newClient(t, clients, redlock.WithTTL(ttl))
	b := newClient(t, clients, redlock.WithTTL(ttl), redlock.WithRetry(hourRetry))
	t0 := time.Now()
	clock := testclock.New(t0)
	redlock.SetClock(b, clock.Now)
	key := redistest.Key(t)
	ma, err := a.NewMutex(key)
	require.NoError(t, err)
	mb, err := b.NewMutex(key)
	require.NoError(t, err)
	// B's subscriptions confirm after it queued, and each confirmation asks
	// it for a refresh, a round that starts wherever the clock is then: the
	// clock moves once none is left to come.
	settled := make(chan struct{}, 1)
	defer redlock.OnSettledWaiter(b, key, func() {
		select {
		case settled <- struct{}{}:
		default:
		}
	})()
	l := queueBehind(ctx, t, clients, key, ma, mb, func() {
		select {
		case <-settled:
		case <-ctx.Done():
			t.Fatal("B never settled in the queue")
		}
		clock.Add(10 * time.Second)
	})
	require.NotNil(t, l)
	drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
	assert.Equal(t, t0.Add(ttl-drift), l.ValidUntil(), "valid from the round's start, T0")
	holders := 0
	for _, c := range clients {
		if c.Get(ctx, key).Val() == l.Value() {
			holders++
		}
	}
	assert.GreaterOrEqual(t, holders, 3, "the release set B's value on a majority as it granted it")
	require.NoError(t, l.Release(ctx))
}

// Grants split between waiters, none of them on a majority (a node's
// queue lacked the entries ahead when it granted), are yielded to waiters
// ahead until one holds, whatever their retry policy: A, B and C queue in
// that order; then node 2 and 3 lose A's entry and node 4 A's and B's, so
// the release grants A nodes 0-1, B 2-3 and C 4. Each holds within
// seconds, one after the other. The order is the tickets' once every node
// has every entry again, but a yield can reach B before A's refresh put
// A's entry back on that node, so the test does not insist on it.
func TestSplitGrantsResolve(t *testing.T) {
	const ttl = 30 * time.Second
	ctx, clients, key, held := heldOn(t, 5, ttl)
	got := make(chan string, 3)
	leases := make(chan *redlock.Lease, 3)
	for i, name := range []string{"A", "B", "C"} {
		c := newClient(t, clients, redlock.WithTTL(ttl), redlock.WithRetry(hourRetry))
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		go func() {
			l, err := m.Lock(ctx)
			if assert.NoError(t, err, name) {
				got <- name
				leases <- l
			}
		}()
		queuedOnAll(t, clients, key, int64(i+1))
	}
	for i := 2; i < 5; i++ {
		drop := 1 // A's entry
		if i == 4 {
			drop = 2 // A's and B's
		}
		dropFirst(ctx, t, clients[i], key, drop)
	}
	require.NoError(t, held.Release(ctx))
	seen := map[string]bool{}
	for range 3 {
		select {
		case name := <-got:
			assert.False(t, seen[name], "%s held twice", name)
			seen[name] = true
			require.NoError(t, (<-leases).Release(ctx))
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v held: the split grants were not handed on", seen)
		}
	}
}

// A split can outlast the look that should end it: B holds node 1's grant
// and looks a round timeout (100ms) later, before A (node timeout 2s) has
// queued there again, so nothing is ahead of it yet. Node 2 is held by
// someone else for a minute and A holds node 0: no majority forms unless B
// looks again, later, and yields node 1 to A, which then holds.
func TestSplitIsLookedAtAgain(t *testing.T) {
	const ttl = 30 * time.Second
	ctx, clients, key, held := heldOn(t, 3, ttl)
	require.NoError(t, clients[2].Set(ctx, key, "someone else", time.Minute).Err())
	got := make(chan string, 2)
	for i, name := range []string{"A", "B"} {
		opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithRetry(hourRetry)}
		if name == "A" {
			opts = append(opts, redlock.WithNodeTimeout(2*time.Second))
		}
		m, err := newClient(t, clients, opts...).NewMutex(key)
		require.NoError(t, err)
		go func() {
			l, err := m.Lock(ctx)
			if assert.NoError(t, err, name) {
				got <- name
				assert.NoError(t, l.Release(ctx))
			}
		}()
		queuedOnAll(t, clients, key, int64(i+1))
	}
	dropFirst(ctx, t, clients[1], key, 1) // A's entry: node 1 grants B
	require.NoError(t, held.Release(ctx))
	for _, want := range []string{"A", "B"} {
		select {
		case name := <-got:
			assert.Equal(t, want, name)
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never held: the split was not looked at again", want)
		}
	}
}

// heldOn is a key held for ttl by a Client of its own over n fresh nodes.
func heldOn(t *testing.T, n int, ttl time.Duration) (context.Context, []redis.UniversalClient, string, *redlock.Lease) {
	t.Helper()
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, n))
	key := redistest.Key(t)
	m, err := newClient(t, clients, redlock.WithTTL(ttl)).NewMutex(key)
	require.NoError(t, err)
	held, err := m.TryLock(ctx)
	require.NoError(t, err)
	return ctx, clients, key, held
}

// dropFirst removes the first n entries of key's queue on one node.
func dropFirst(ctx context.Context, t *testing.T, c redis.UniversalClient, key string, n int) {
	t.Helper()
	q := "{" + key + "}:queue"
	first, err := c.ZRange(ctx, q, 0, int64(n-1)).Result()
	require.NoError(t, err)
	require.Len(t, first, n)
	require.NoError(t, c.ZRem(ctx, q, anys(first)...).Err())
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// queueBehind has mb queue behind a lease of ma (on every node), runs
// whileQueued once mb is queued on every node, then has ma release: it returns mb's lease, made
// of the grants.
func queueBehind(ctx context.Context, t *testing.T, clients []redis.UniversalClient, key string, ma, mb *redlock.Mutex, whileQueued func()) *redlock.Lease {
	t.Helper()
	la, err := ma.Lock(ctx)
	require.NoError(t, err)
	landedEverywhere(t, clients, key, la.Value()) // so that mb queues on every node
	got := make(chan *redlock.Lease, 1)
	go func() {
		l, err := mb.Lock(ctx)
		assert.NoError(t, err)
		got <- l
	}()
	queuedOnAll(t, clients, key, 1)
	whileQueued()
	require.NoError(t, la.Release(ctx))
	return <-got
}

// A Mutex whose last Lock had to queue joins at once next time, with no
// attempt first (no SET NX on any node): under contention a releaser that
// wants the key again makes one round, not two. A join that finds the key
// free is granted it at once, and clears the hint: the Lock after it makes
// the plain attempt again.
func TestLockAfterQueueingJoinsFirst(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	a := newClient(t, clients, redlock.WithQuarantine(0))
	b := newClient(t, clients, redlock.WithQuarantine(0), redlock.WithRetry(hourRetry))
	key := redistest.Key(t)
	ma, err := a.NewMutex(key)
	require.NoError(t, err)
	mb, err := b.NewMutex(key)
	require.NoError(t, err)
	// B queues behind A; count the SETs the nodes ran until then: A's SET NX,
	// and B's attempt if it made one.
	var sets int
	countSets := func() { sets = callsOn(t, clients, "set") }
	resetStats(t, clients)
	lb := queueBehind(ctx, t, clients, key, ma, mb, countSets)
	assert.Equal(t, 2*len(clients), sets, "A's SET NX, then the first queued Lock's attempt (one SET NX per node)")
	require.NoError(t, lb.Release(ctx))
	landedEverywhere(t, clients, key, "")
	resetStats(t, clients)
	lb = queueBehind(ctx, t, clients, key, ma, mb, countSets)
	assert.Equal(t, len(clients), sets, "after queueing, the next Lock joins at once: no attempt (A's own SET NX only)")
	require.NoError(t, lb.Release(ctx))
	landedEverywhere(t, clients, key, "")
	resetStats(t, clients)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = mb.Lock(cctx) // a context ended already: no join either
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, callsOn(t, clients, "evalsha"), "no join for a Lock whose context had ended")
	lb, err = mb.Lock(ctx) // the key is free: the join grants it at once
	require.NoError(t, err)
	assert.Equal(t, len(clients), callsOn(t, clients, "set"), "the join's own SET on every node, no attempt")
	require.NoError(t, lb.Release(ctx))
	landedEverywhere(t, clients, key, "")
	resetStats(t, clients)
	lb, err = mb.Lock(ctx)
	require.NoError(t, err)
	landedEverywhere(t, clients, key, lb.Value())
	assert.Equal(t, len(clients), callsOn(t, clients, "set"), "the hint is gone: an attempt, one SET NX per node")
	assert.Zero(t, callsOn(t, clients, "evalsha"), "and no join")
	require.NoError(t, lb.Release(ctx))
}

// A Lock that joins first makes its join even when its retry policy stops at
// once: the join is its attempt, and its error says what the nodes answered.
func TestJoinFirstIsAnAttempt(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	a := newClient(t, clients, redlock.WithQuarantine(0))
	var policies atomic.Int32
	b := newClient(t, clients, redlock.WithQuarantine(0), redlock.WithRetry(func() backoff.BackOff {
		if policies.Add(1) == 1 {
			return hourRetry() // the first Lock waits in the queue
		}
		return &backoff.StopBackOff{} // the next one has one attempt
	}))
	key := redistest.Key(t)
	ma, err := a.NewMutex(key)
	require.NoError(t, err)
	mb, err := b.NewMutex(key)
	require.NoError(t, err)
	require.NoError(t, queueBehind(ctx, t, clients, key, ma, mb, func() {}).Release(ctx))
	landedEverywhere(t, clients, key, "")
	la, err := ma.Lock(ctx)
	require.NoError(t, err)
	landedEverywhere(t, clients, key, la.Value())
	resetStats(t, clients)
	_, err = mb.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrTaken)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe, "the join's votes")
	assert.Zero(t, qe.Got)
	assert.ErrorContains(t, err, "gave up after 1 attempts")
	for i, cl := range clients {
		assert.Zero(t, commandCalls(t, cl, "set"), "node %d: no attempt", i)
		assert.Equal(t, 2, commandCalls(t, cl, "evalsha"), "node %d: the join, then the leave", i)
	}
	queuedOnAll(t, clients, key, 0) // and it left the queue
	require.NoError(t, la.Release(ctx))
}
