package locktest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

func extendAfterExpiry(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: 300 * time.Millisecond, NodeTimeout: 100 * time.Millisecond})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, l)
	// Let Redis expire the keys too (validity ends a little before the TTL).
	require.Eventually(t, func() bool { return count(holders(t, clients, key), "") == env.Nodes },
		10*time.Second, 10*time.Millisecond)
	err = l.Extend(ctx)
	require.ErrorIs(t, err, redlock.ErrLost)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "extend re-created no key")
	assert.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
}

// The keys vanish while the lease is still valid by the client's clock (a
// restart, a flush): Extend must notice, not re-create them, and end the lease.
func extendAfterKeyLoss(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	l := take(ctx, t, m)
	// Let the requests still in flight after the early decision land first.
	require.Eventually(t, func() bool { return count(holders(t, clients, key), l.Value()) == env.Nodes },
		5*time.Second, 5*time.Millisecond)
	lose := env.Nodes - majority(env.Nodes) + 1 // just enough that no majority holds it
	for i := 0; i < lose; i++ {
		require.NoError(t, clients[i].Del(ctx, key).Err())
	}
	err := l.Extend(ctx)
	require.ErrorIs(t, err, redlock.ErrLost)
	assert.ErrorIs(t, err, redlock.ErrNotHeld)
	assert.ErrorIs(t, l.Err(), redlock.ErrLost)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is not closed after a lost extend")
	}
	for i := 0; i < lose; i++ {
		assert.Equal(t, "", holders(t, clients, key)[i], "node %d: key not re-created", i)
	}
	assert.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	landedEverywhere(t, clients, key, "", "release still removed what remained")
}

func releaseAfterExpiry(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	a, err := env.NewMutex(t, clients, key, Setup{TTL: 300 * time.Millisecond, NodeTimeout: 100 * time.Millisecond}).TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, a)
	mb := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	var b *redlock.Lease
	require.Eventually(t, func() bool {
		b, err = mb.TryLock(ctx)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "B acquires once A's keys expire")
	assert.ErrorIs(t, a.Release(ctx), redlock.ErrLost)
	assert.GreaterOrEqual(t, count(holders(t, clients, key), b.Value()), majority(env.Nodes), "A's release deleted nothing of B's")
	require.NoError(t, b.Release(ctx))
}

// driftAllowance is what the lock takes off a lease's validity for clock
// drift, at the default drift factor.
func driftAllowance(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*DefaultDrift) + ExtraDrift
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
func validityBound(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	const ttl = 2 * time.Second
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
		assert.Equal(t, ttl-decided.Sub(start)-driftAllowance(ttl), remaining, "validity = TTL - elapsed - drift")
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
func noLeaseWithoutValidity(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	const ttl = time.Second
	var mu sync.Mutex
	var calls int
	base := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls%2 == 0 { // every second reading is one TTL later
			return base.Add(ttl - ExtraDrift)
		}
		return base
	}
	m := env.NewMutex(t, clients, key, Setup{TTL: ttl, Clock: clock, NoRetry: true})
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Contains(t, err.Error(), "no validity")
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "the keys taken were released")
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "Lock with no retries fails the same way")
}

func doneOnExpiry(t *testing.T, env Env) {
	ctx := ctxT(t)
	clients := setupNodes(t, env)
	l, err := env.NewMutex(t, clients, redistest.Key(t), Setup{TTL: 200 * time.Millisecond, NodeTimeout: 80 * time.Millisecond}).TryLock(ctx)
	require.NoError(t, err)
	waitDone(t, ctx, l)
	assert.False(t, time.Now().Before(l.ValidUntil()), "Done closed no earlier than ValidUntil")
	assert.ErrorIs(t, l.Err(), redlock.ErrLost)
}
