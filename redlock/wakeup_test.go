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

// A split vote (other owners on a majority of the nodes, none of them on a
// majority) earns a quick retry or two, since nobody may hold the lock and no
// release will be announced; a split that persists, as here, then waits for
// the back-off: Lock does not spin.
func TestSplitVoteRetriesThenBacksOff(t *testing.T) {
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
	require.Eventually(t, func() bool { return h.calls.Load() >= 3 }, 10*time.Second, time.Millisecond,
		"the first attempt and two quick retries")
	require.Eventually(t, func() bool { _, s := redlock.WakeState(c, key); return s == 5 }, 10*time.Second, time.Millisecond)
	// One more attempt is allowed: the subscription becoming active wakes the
	// waiter, as a release may have been announced before it. Any further
	// attempt would come an hour later, so this window cannot fail a correct
	// Lock, however slow the machine; it gives a spinning one time to show.
	assert.Never(t, func() bool { return h.calls.Load() > 4 }, 200*time.Millisecond, 5*time.Millisecond,
		"no more quick retries once the split persisted")
	cancel()
	err = <-done
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	// One more attempt is allowed: the subscription becoming active wakes the
	// waiter, as a release may have been announced before it.
	t.Logf("calls %d err %v", h.calls.Load(), err)
	assert.LessOrEqual(t, h.calls.Load(), int32(4), "no more quick retries once the split persisted")
}
