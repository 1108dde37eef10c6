package quorum_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/quorum"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		assert.Equal(t, want, quorum.Majority(n), "n=%d", n)
	}
}

var errNo = errors.New("no")

// gated returns a call whose node i answers when gates[i] is closed, with
// success if ok[i].
func gated(gates []chan struct{}, ok []bool) quorum.Call[int] {
	return func(ctx context.Context, i int) (int, error) {
		select {
		case <-gates[i]:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if ok[i] {
			return i, nil
		}
		return 0, errNo
	}
}

// startGated starts a round over len(ok) calls that need yes answers: call
// i answers ok[i] once its gate opens (see open).
func startGated(ok []bool, need int) (*quorum.Round[int], []chan struct{}, *quorum.Tracker) {
	g := make([]chan struct{}, len(ok))
	for i := range g {
		g[i] = make(chan struct{})
	}
	tr := new(quorum.Tracker)
	return quorum.Start(context.Background(), len(ok), need, time.Minute, tr, gated(g, ok)), g, tr
}

// open opens the gates.
func open(gates ...chan struct{}) {
	for _, g := range gates {
		close(g)
	}
}

// Every subset of 5 nodes answering yes: the round is decided in favour
// exactly when at least 3 said yes, and it is decided before the
// undecided nodes answer whenever the answered ones already settle it.
func TestEverySubsetDecides(t *testing.T) {
	const n = 5
	for mask := 0; mask < 1<<n; mask++ {
		ok := make([]bool, n)
		yes := 0
		for i := range ok {
			ok[i] = mask&(1<<i) != 0
			if ok[i] {
				yes++
			}
		}
		r, g, tr := startGated(ok, quorum.Majority(n))
		open(g...)
		assert.Equal(t, yes >= 3, r.Wait(), "mask %05b", mask)
		assert.Equal(t, yes, r.OK())
		assert.Len(t, r.Replies(), n)
		tr.Wait()
	}
}

func TestEarlyDecisionLeavesPendingCalls(t *testing.T) {
	r, g, tr := startGated([]bool{true, true, true, true, true}, 3)
	open(g[:3]...)
	require.True(t, r.Decide(), "three yes out of five decide the round")
	assert.Equal(t, []int{3, 4}, r.Pending())
	open(g[3:]...)
	tr.Wait()
}

func TestEarlyDecisionAgainst(t *testing.T) {
	r, g, tr := startGated([]bool{false, false, false, true, true}, 3)
	open(g[:3]...)
	require.False(t, r.Decide(), "three no out of five make a quorum impossible")
	assert.True(t, r.Decided())
	assert.Len(t, r.Pending(), 2)
	open(g[3:]...)
	assert.False(t, r.Wait())
	assert.Equal(t, 2, r.OK())
	tr.Wait()
}

// A call that ignores its context is counted as timed out at the per-node
// timeout all the same; its goroutine is joined by the Tracker once it ends.
func TestTimeoutEnforcedForCallsIgnoringContext(t *testing.T) {
	release := make(chan struct{})
	var tr quorum.Tracker
	r := quorum.Start(context.Background(), 3, 2, 20*time.Millisecond, &tr,
		func(_ context.Context, i int) (int, error) {
			if i == 2 {
				<-release // ignores ctx entirely
			}
			return i, nil
		})
	require.True(t, r.Wait())
	var timedOut []int
	for _, rep := range r.Replies() {
		if errors.Is(rep.Err, quorum.ErrTimeout) {
			timedOut = append(timedOut, rep.Index)
		}
	}
	assert.Equal(t, []int{2}, timedOut)
	close(release)
	tr.Wait()
}

func TestParentCancelEndsRound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var tr quorum.Tracker
	r := quorum.Start(ctx, 3, 2, time.Minute, &tr,
		func(_ context.Context, i int) (int, error) {
			<-release
			return i, nil
		})
	cancel()
	require.False(t, r.Wait())
	for _, rep := range r.Replies() {
		assert.ErrorIs(t, rep.Err, context.Canceled)
	}
	close(release)
	tr.Wait()
}

func TestCallTimeoutMapsToErrTimeout(t *testing.T) {
	var tr quorum.Tracker
	r := quorum.Start(context.Background(), 1, 1, 10*time.Millisecond, &tr,
		func(ctx context.Context, _ int) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
	require.False(t, r.Wait())
	require.Len(t, r.Replies(), 1)
	assert.ErrorIs(t, r.Replies()[0].Err, quorum.ErrTimeout)
	tr.Wait()
}

func TestSettleWaitsForStragglers(t *testing.T) {
	r, g, tr := startGated([]bool{true, true, true}, 2)
	open(g[:2]...)
	require.True(t, r.Decide())
	settled := make(chan struct{})
	go func() { r.Settle(); close(settled) }()
	select {
	case <-settled:
		t.Fatal("Settle returned while a call was still running")
	default:
	}
	open(g[2])
	<-settled
	tr.Wait()
}

func TestSettleBoundedByDeadline(t *testing.T) {
	release := make(chan struct{})
	var tr quorum.Tracker
	const timeout = 20 * time.Millisecond
	t0 := time.Now()
	r := quorum.Start(context.Background(), 1, 1, timeout, &tr,
		func(_ context.Context, i int) (int, error) { <-release; return i, nil })
	r.Settle() // returns at the deadline although the call still runs
	assert.GreaterOrEqual(t, time.Since(t0), timeout, "Settle returned before the deadline while the call still ran")
	close(release)
	tr.Wait()
}

// Settle on a round whose calls have all returned allocates nothing (no
// timer): Release settles its acquire's round on every lock+release cycle.
func TestSettleOfFinishedRoundAllocatesNothing(t *testing.T) {
	r := quorum.Begin[int](context.Background(), 2, 1, time.Minute)
	r.Deliver(0, 1, nil)
	r.Deliver(1, 1, nil)
	assert.Zero(t, testing.AllocsPerRun(100, r.Settle))
}

// A round whose calls the caller runs itself: delivered replies count, an
// undelivered call times out at the deadline, and a delivery after that is
// dropped without blocking.
func TestBeginDeliver(t *testing.T) {
	r := quorum.Begin[int](context.Background(), 3, 2, 50*time.Millisecond)
	dl, ok := r.Context().Deadline()
	require.True(t, ok)
	assert.Equal(t, r.Deadline(), dl)
	r.Deliver(0, 7, nil)
	r.Deliver(2, 0, errNo)
	assert.False(t, r.Decide(), "1 of 2 needed; node 1 never answers")
	require.Len(t, r.Replies(), 3)
	assert.ErrorIs(t, r.Replies()[2].Err, quorum.ErrTimeout)
	assert.Equal(t, []int{}, pendingOrEmpty(r.Pending()))
	r.Deliver(1, 9, nil) // late: dropped
	r.Settle()
	assert.Equal(t, 1, r.OK())

	// More nodes than the round's inline room, and a cancelled parent.
	ctx, cancel := context.WithCancel(context.Background())
	r = quorum.Begin[int](ctx, 11, 6, time.Minute)
	for i := 0; i < 5; i++ {
		r.Deliver(i, i, nil)
	}
	cancel()
	assert.False(t, r.Wait())
	require.Len(t, r.Replies(), 11)
	assert.Equal(t, 5, r.OK())
	for _, rep := range r.Replies()[5:] {
		assert.ErrorIs(t, rep.Err, context.Canceled)
	}
	for i := 5; i < 11; i++ {
		r.Deliver(i, i, ctx.Err())
	}
	r.Settle()
}

func pendingOrEmpty(p []int) []int {
	if p == nil {
		return []int{}
	}
	return p
}

// TestOneCallNeverLost: a round of one call has no reply channel; the call
// delivered before its deadline is never taken for a timeout, however the
// delivery and the wait interleave.
func TestOneCallNeverLost(t *testing.T) {
	var wg sync.WaitGroup
	var lost atomic.Int32
	for range 16 {
		wg.Go(func() {
			for i := 0; i < 3000; i++ {
				r := quorum.Begin[int](context.Background(), 1, 1, time.Minute)
				go r.Deliver(0, i, nil)
				if !r.Decide() || r.Replies()[0].Value != i {
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, lost.Load(), "deliveries taken for timeouts")
}

// TestNoWakeUpLost: a round of five whose first four calls are delivered
// from four goroutines while its owner waits (Decide, then WaitFor those
// four) is taken as soon as they decide it, before the round's deadline (a
// lost wake-up would leave the owner waiting until then: the fifth call is
// delivered only after), however the deliveries and the waits interleave.
func TestNoWakeUpLost(t *testing.T) {
	const n = 5
	var wg sync.WaitGroup
	var lost atomic.Int32
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 1000 && lost.Load() == 0; i++ {
				r := quorum.Begin[int](context.Background(), n, quorum.Majority(n), 10*time.Second)
				for c := range n - 1 {
					var err error
					if i%2 == 1 && c < 3 { // three against; else four for
						err = errNo
					}
					go r.Deliver(c, c, err)
				}
				decided := r.Decide() == (i%2 == 0)
				r.WaitFor([]int{0, 1, 2, 3})
				if !decided || !time.Now().Before(r.Deadline()) || len(r.Replies()) != n-1 {
					lost.Add(1)
				}
				r.Deliver(n-1, 0, nil)
				r.Wait()
			}
		})
	}
	wg.Wait()
	assert.Zero(t, lost.Load(), "rounds not taken before their deadline")
}

// TestRest: the replies the owner did not take go to Rest's f once the last
// call delivered (on that call's goroutine), at once when every call had
// delivered already, and f does not run when none is left.
func TestRest(t *testing.T) {
	r := quorum.Begin[int](context.Background(), 3, 2, time.Minute)
	r.Deliver(0, 0, nil)
	r.Deliver(1, 1, nil)
	require.True(t, r.Decide())
	var rest []int
	r.Rest(func(reps []quorum.Reply[int]) {
		for _, rep := range reps {
			rest = append(rest, rep.Index)
		}
	})
	assert.Empty(t, rest, "call 2 has not delivered")
	r.Deliver(2, 2, errNo)
	assert.Equal(t, []int{2}, rest, "the last delivery hands it over")

	r = quorum.Begin[int](context.Background(), 3, 2, time.Minute)
	r.Deliver(0, 0, nil)
	r.Deliver(1, 1, nil)
	require.True(t, r.Decide())
	r.Deliver(2, 2, nil)
	rest = nil
	r.Rest(func(reps []quorum.Reply[int]) {
		for _, rep := range reps {
			rest = append(rest, rep.Index)
		}
	})
	assert.Equal(t, []int{2}, rest, "delivered before Rest: handed over at once")

	r = quorum.Begin[int](context.Background(), 2, 2, time.Minute)
	r.Deliver(0, 0, nil)
	r.Deliver(1, 1, nil)
	require.True(t, r.Wait())
	r.Rest(func([]quorum.Reply[int]) { t.Error("nothing was left") })
}
