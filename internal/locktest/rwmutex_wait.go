package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/redlock"
)

// firstRetry is a constant back-off that closes refused (once) when it is
// first asked for a delay: the Lock's first attempt has failed.
type firstRetry struct {
	backoff.BackOff
	once    sync.Once
	refused chan struct{}
}

func newFirstRetry(d time.Duration) *firstRetry {
	return &firstRetry{BackOff: backoff.NewConstantBackOff(d), refused: make(chan struct{})}
}

func (f *firstRetry) NextBackOff() time.Duration {
	f.once.Do(func() { close(f.refused) })
	return f.BackOff.NextBackOff()
}

func (f *firstRetry) option() redlock.Option {
	return redlock.WithRetry(func() backoff.BackOff { return f })
}

// waitRefused waits, bounded by ctx, until the first attempt of a waiting
// call (RLock, Lock) was refused, which its retry policy reports on refused
// (firstRetry.refused, Stepper.Failed); if the call returns before, the
// test fails with its error.
func waitRefused(ctx context.Context, t *testing.T, refused <-chan struct{}, got <-chan result) {
	t.Helper()
	select {
	case <-refused:
	case res := <-got:
		t.Fatalf("the waiting call returned before it was refused: %v", res.err)
	case <-ctx.Done():
		t.Fatal("the waiting call was never refused")
	}
}

// intentsQuiet counts the nodes where the key's writer-intent marker is,
// for a condition that testify polls from another goroutine: a node's error
// counts as a marker there.
func intentsQuiet(clients []redis.UniversalClient, key string) int {
	n := 0
	for _, c := range clients {
		if x, err := c.Exists(context.Background(), IntentKey(key)).Result(); err != nil || x == 1 {
			n++
		}
	}
	return n
}

// Readers keep churning, each next reader entering before the current one
// leaves, so that a reader always holds, while a writer waits in Lock, one
// step at a time (Stepper): after each of its refused attempts one reader
// cycle runs. The writer is refused exactly once: its attempt left the
// intent marker, the next reader is refused, the current one leaves, and the
// writer's second attempt gets in. Without the marker every cycle admits the
// next reader and the writer never gets in (the control: the test stops at
// ten cycles).
func rwStarvationScripted(t *testing.T, k Kind) {
	const maxCycles = 10
	ctx, clients, c, key := rwFresh(t, k)
	step := NewStepper(ctx)
	writer := rwm(t, c, key, redlock.WithRetry(func() backoff.BackOff { return step }))
	readers := rwm(t, c, key)
	cur := tryR(ctx, t, readers)
	require.NotNil(t, cur)
	// TryRLock returns at a majority: a writer's request that reaches a node
	// before the reader's is granted there, and the writer is refused
	// without its intent on that node.
	landed(t, func() bool { return recordedQuiet(clients, key, cur.Value()) == k.Nodes }, "the first reader on every node")
	got := lockAsync(ctx, writer.Lock)
	refused, admitted := 0, 0
	var w *redlock.Lease
	for w == nil {
		select {
		case res := <-got:
			require.NoError(t, res.err)
			w = res.l
			continue
		case <-step.Failed:
		case <-ctx.Done():
			t.Fatal("the writer's Lock neither failed an attempt nor returned")
		}
		refused++
		require.Less(t, refused, maxCycles, "the writer is starved: %d readers entered while it waited", admitted)
		// The attempt is decided at a majority of refusals; its last
		// requests land a moment later.
		landed(t, func() bool { return intentsQuiet(clients, key) == k.Nodes }, "the refused attempt left its intent on every node")
		next := tryR(ctx, t, readers) // the next reader tries to enter before the current one leaves
		if next != nil {
			admitted++
			landed(t, func() bool { return recordedQuiet(clients, key, next.Value()) == k.Nodes }, "the admitted reader on every node")
		}
		require.NoError(t, cur.Release(ctx))
		cur = next
		step.Next <- struct{}{}
	}
	assert.Equal(t, 1, refused, "the writer's attempts refused")
	assert.Zero(t, admitted, "readers admitted after the writer's first refused attempt")
	// Lock returns at a majority, and a request still queued for a busy node
	// then is not sent (a loaded machine): the writer is on a majority, and
	// every node that granted it has no intent left.
	landed(t, func() bool { return count(holdersQuiet(clients, key), w.Value()) >= majority(k.Nodes) }, "the writer on a majority")
	landed(t, func() bool {
		return intentsQuiet(clients, key) <= k.Nodes-count(holdersQuiet(clients, key), w.Value())
	}, "the granted writer deleted its intent where it was granted")
	require.NoError(t, w.Release(ctx))
	admits(ctx, t, readers.TryRLock, "a reader enters at once after the writer")
}

// Reader goroutines churn on their own: each takes its next read lease
// before releasing the one it holds (TryRLock; only when that is refused
// does it release first and wait in RLock), so that without the intent
// marker a reader would always hold and the writer never get in. A writer
// waits in Lock. No read acquire begun after the writer's first refused
// attempt is admitted, each reader goroutine completes at most two cycles
// from then on, and the writer gets in (counted, not timed; the control
// without the marker fails at the Lock's deadline).
func rwStarvationChurn(t *testing.T, k Kind) {
	const readers = 3
	ctx, _, c, key := rwFresh(t, k)
	first := newFirstRetry(2 * time.Millisecond)
	writer := rwm(t, c, key, first.option())
	fast := redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) })
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	marked := func() bool {
		select {
		case <-first.refused:
			return true
		default:
			return false
		}
	}
	var cycles, admitted, total atomic.Int32
	var wg sync.WaitGroup
	holding := make(chan struct{}, readers)
	for range readers {
		rw := rwm(t, c, key, fast)
		wg.Go(func() {
			prev, err := rw.RLock(rctx)
			holding <- struct{}{}
			if err != nil {
				return
			}
			for {
				after := marked()
				next, err := rw.TryRLock(rctx)
				if err == nil && after {
					admitted.Add(1)
				}
				_ = prev.Release(context.WithoutCancel(rctx))
				total.Add(1)
				if marked() {
					cycles.Add(1)
				}
				if err != nil {
					if next, err = rw.RLock(rctx); err != nil {
						return
					}
				}
				prev = next
			}
		})
	}
	for range readers {
		<-holding
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	l, err := writer.Lock(wctx)
	cancel()
	after := cycles.Load()
	stop()
	wg.Wait()
	require.NoError(t, err, "the writer gets in while readers churn (%d reader cycles in all)", total.Load())
	assert.Zero(t, admitted.Load(), "read acquires begun after the writer's first refused attempt and admitted")
	assert.LessOrEqual(t, after, int32(2*readers), "reader cycles after the writer's first refused attempt")
	t.Logf("%d reader cycles in all, %d after the writer's first refused attempt", total.Load(), after)
	require.NoError(t, l.Release(ctx))
}

// A Lock that gives up withdraws its intent: while it waits every node has
// the marker and a new reader is refused ("a writer waits"); once its
// context is cancelled, the marker is gone from every node and a reader
// enters at the first attempt.
func rwGiveUp(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	r := tryR(ctx, t, rw)
	require.NotNil(t, r)
	landed(t, func() bool { return recordedQuiet(clients, key, r.Value()) == k.Nodes }, "the reader on every node")
	// After its first refused attempt the Lock waits (its back-off, capped
	// at TTL/4) with none of its requests in flight when it is cancelled: a
	// request still in flight could set the marker again after the
	// withdrawal, to expire with its TTL.
	first := newFirstRetry(time.Hour)
	writer := rwm(t, c, key, first.option())
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := lockAsync(wctx, writer.Lock)
	waitRefused(ctx, t, first.refused, got)
	landed(t, func() bool { return intentsQuiet(clients, key) == k.Nodes }, "the refused attempt left its intent on every node")
	_, err := rw.TryRLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Contains(t, err.Error(), "a writer waits")
	cancel()
	err = (<-got).err
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	landed(t, func() bool { return intentsQuiet(clients, key) == 0 }, "the Lock that gave up withdraws its intent")
	admits(ctx, t, rw.TryRLock, "a reader at the first attempt")
	require.NoError(t, r.Release(ctx))
}
