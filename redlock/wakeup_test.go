package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
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
