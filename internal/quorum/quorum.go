package quorum

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout is the error recorded for a call that did not return within the
// per-node timeout.
var ErrTimeout = errors.New("quorum: node timed out")

// Majority returns the smallest number of nodes that forms a majority of n:
// n/2 + 1.
func Majority(n int) int { return n/2 + 1 }

// Reply is the outcome of one call.
type Reply[T any] struct {
	// Index is the node's position, from 0 to n-1.
	Index int
	// Value is what the call returned; meaningful only when Err is nil.
	Value T
	// Err is nil for a success; otherwise the call's error, ErrTimeout, or
	// the parent context's error.
	Err error
	// Elapsed is how long the call took, measured from the start of the round.
	Elapsed time.Duration
}

// Call is one node's operation. A nil error counts as a success; any error
// (a refusal as much as a failure) counts against the quorum.
type Call[T any] func(ctx context.Context, index int) (value T, err error)

// Tracker counts goroutines that may outlive a round (calls that ignored their
// context). The zero value is ready to use; it must not be copied after first
// use.
type Tracker struct{ wg sync.WaitGroup }

// Wait blocks until every goroutine started under t has returned.
func (t *Tracker) Wait() { t.wg.Wait() }

// Round is one fan-out in progress. Its methods must be called from the
// goroutine that started it.
type Round[T any] struct {
	n, need int
	one     Reply[T] // one call's reply, there once allDone is closed

	// Several calls: deliveries wait in inbox until the owner takes them,
	// and wake it only when they may meet what it waits for (goal), so a
	// round of n calls costs its owner one wake-up, not n.
	mu         sync.Mutex
	inbox      []Reply[T]
	inboxArr   [8]Reply[T]
	dOK, dFail int              // delivered so far, taken or not
	goal       int              // what the owner waits for: goalNone, goalDecided, goalAll, or goalIndex+i
	signal     chan struct{}    // buffered 1: goal met
	rest       func([]Reply[T]) // set by Rest: takes the replies left once the last call delivered
	parent     context.Context
	got        []Reply[T]
	seen       []bool
	// Room for got and seen in the round's own allocation, for up to 8
	// nodes.
	gotArr   [8]Reply[T]
	seenArr  [8]bool
	ok, fail int
	started  time.Time
	timeout  time.Duration

	ctx      context.Context    // the calls' shared context (Begin, Start)
	deadline time.Time          // ctx's
	release  context.CancelFunc // releases ctx, once all returned
	running  atomic.Int32       // calls still running
	allDone  chan struct{}      // closed when running reaches 0
}

// Start launches call for every index in [0, n) in its own goroutine, all
// under one context derived from ctx with the given per-node timeout. need is
// the number of successes that decides the round in favour (1 <= need <= n).
// Goroutines are registered with tr (which may be nil).
func Start[T any]( // the calls run under the round's context, derived from ctx
	ctx context.Context, n, need int, timeout time.Duration, tr *Tracker, call Call[T]) *Round[T] {
	r := Begin[T](ctx, n, need, timeout)
	nctx := r.ctx
	for i := 0; i < n; i++ {
		if tr != nil {
			tr.wg.Add(1)
		}
		go func(i int) {
			if tr != nil {
				defer tr.wg.Done()
			}
			v, err := call(nctx, i)
			r.Deliver(i, v, err)
		}(i)
	}
	return r
}

// Begin opens a round whose calls the caller runs itself, by whatever means
// (a pipeline shared with other rounds, say): each call must run under
// Context and report its outcome, exactly once per index, with Deliver. The
// round's timer starts now: a call not delivered within timeout counts as
// timed out, whether or not its executor ever delivers.
func Begin[T any](ctx context.Context, n, need int, timeout time.Duration) *Round[T] {
	r := new(Round[T])
	r.Init(ctx, n, need, timeout)
	return r
}

// Init is Begin on a Round the caller allocated (with what it needs beside
// it, say), which must be zero and must not be copied after.
func (r *Round[T]) Init(ctx context.Context, n, need int, timeout time.Duration) {
	if n < 1 || need < 1 || need > n || timeout <= 0 {
		panic("quorum: Begin needs 1 <= need <= n and a positive timeout")
	}
	r.n, r.need, r.parent, r.started, r.timeout = n, need, ctx, time.Now(), timeout
	r.allDone = make(chan struct{})
	if n > 1 {
		r.signal = make(chan struct{}, 1)
		r.inbox = r.inboxArr[:0]
	}
	if n <= len(r.seenArr) {
		r.seen, r.got = r.seenArr[:n], r.gotArr[:0]
	} else {
		r.seen, r.got = make([]bool, n), make([]Reply[T], 0, n)
	}
	r.running.Store(int32(n))
	// One deadline for the whole round, shared by every call (they start
	// together); the last call to finish releases it. Its Done channel is
	// also the round's timer.
	r.ctx, r.release = context.WithTimeout(ctx, timeout)
	r.deadline, _ = r.ctx.Deadline()
}

// Context returns the context every call of the round runs under: the
// parent's, with the per-node deadline.
func (r *Round[T]) Context() context.Context { return r.ctx }

// Deadline returns when the round's calls time out: after the per-node
// timeout, or earlier at the parent context's deadline.
func (r *Round[T]) Deadline() time.Time { return r.deadline }

// Deliver reports call index's outcome. It may be called from any goroutine,
// once per index; a delivery after the round has given up on the call is
// dropped.
func (r *Round[T]) Deliver(index int, v T, err error) {
	if err != nil && errors.Is(err, context.DeadlineExceeded) && r.parent.Err() == nil {
		err = ErrTimeout
	}
	rep := Reply[T]{Index: index, Value: v, Err: err, Elapsed: time.Since(r.started)}
	if r.n == 1 {
		r.one = rep // one call: allDone, closed below, says it is there
	} else {
		r.mu.Lock()
		r.inbox = append(r.inbox, rep)
		if err == nil {
			r.dOK++
		} else {
			r.dFail++
		}
		wake := r.goal != goalNone && r.delivered(r.goal)
		if wake {
			r.goal = goalNone
		}
		var (
			rest func([]Reply[T])
			left []Reply[T]
		)
		if r.rest != nil && r.dOK+r.dFail == r.n {
			rest, left, r.rest = r.rest, r.inbox, nil
		}
		r.mu.Unlock()
		if rest != nil && len(left) > 0 {
			rest(left) // the owner no longer takes them
		}
		if wake {
			select { // never blocks: a signal left by a wait that ended otherwise is as good
			case r.signal <- struct{}{}:
			default:
			}
		}
	}
	if r.running.Add(-1) == 0 {
		close(r.allDone) // before the release: a round that sees its context end finds one
		r.release()
	}
}

// Decided reports whether the outcome can no longer change.
func (r *Round[T]) Decided() bool {
	return r.ok >= r.need || r.fail > r.n-r.need || len(r.got) == r.n
}

// Reached reports whether at least need calls have succeeded so far.
func (r *Round[T]) Reached() bool { return r.ok >= r.need }

// OK returns the number of successes so far.
func (r *Round[T]) OK() int { return r.ok }

// Need returns the number of successes the round needs.
func (r *Round[T]) Need() int { return r.need }

// Replies returns the replies collected so far, in arrival order, with timed
// out calls included (Err == ErrTimeout).
func (r *Round[T]) Replies() []Reply[T] { return r.got }

// Pending returns the indices that have not replied yet, in order.
func (r *Round[T]) Pending() []int {
	var p []int
	for i, s := range r.seen {
		if !s {
			p = append(p, i)
		}
	}
	return p
}

// Decide blocks until the outcome is decided and reports whether the quorum
// was reached. Calls still running afterwards go on under their own deadline:
// use Wait or Settle to wait for them; nothing needs releasing if the caller
// abandons them.
func (r *Round[T]) Decide() bool {
	r.await(goalDecided)
	return r.Reached()
}

// Wait blocks until every call has replied or passed its deadline and returns
// Reached. A call that ignores its context may still be running when Wait
// returns: the Tracker joins it.
func (r *Round[T]) Wait() bool {
	r.await(goalAll)
	return r.Reached()
}

// WaitFor blocks until each call in idx has replied or passed its deadline,
// leaving the others to run on under theirs.
func (r *Round[T]) WaitFor(idx []int) {
	for _, i := range idx {
		r.await(goalIndex + i)
	}
}

// Settle blocks until every call has returned or the per-node deadline has
// passed, whichever comes first. Unlike the other methods it may be called
// from any goroutine, at any time, any number of times.
func (r *Round[T]) Settle() {
	d := time.Until(r.started.Add(r.timeout))
	if d <= 0 {
		return
	}
	select {
	case <-r.allDone: // the common case: no timer needed
		return
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.allDone:
	case <-t.C:
	}
}

// Rest hands f the replies the owner has not taken (by Decide, Wait or
// WaitFor) and will not wait for: at once when every call has delivered,
// else from the last call's delivery, on its goroutine. f does not run
// when none is left. After Rest the owner calls no other method but OK,
// Need, Replies and Settle.
func (r *Round[T]) Rest(f func(rest []Reply[T])) {
	if r.n == 1 {
		return // Decide, Wait and WaitFor all take the one reply
	}
	r.mu.Lock()
	if r.dOK+r.dFail < r.n {
		r.rest = f
		r.mu.Unlock()
		return
	}
	rest := r.inbox
	r.mu.Unlock()
	if len(rest) > 0 {
		f(rest)
	}
}

// What the owner waits for (Round.goal).
const (
	goalNone    = iota
	goalDecided // Decided
	goalAll     // every call recorded
	goalIndex   // goalIndex+i: call i recorded
)

// met reports whether goal holds on the replies recorded.
func (r *Round[T]) met(goal int) bool {
	switch goal {
	case goalDecided:
		return r.Decided()
	case goalAll:
		return len(r.got) == r.n
	default:
		return r.seen[goal-goalIndex]
	}
}

// delivered reports whether goal would hold once the deliveries so far are
// recorded; with mu held.
func (r *Round[T]) delivered(goal int) bool {
	switch goal {
	case goalDecided:
		return r.dOK >= r.need || r.dFail > r.n-r.need || r.dOK+r.dFail >= r.n
	case goalAll:
		return r.dOK+r.dFail >= r.n
	default:
		return r.inbox[len(r.inbox)-1].Index == goal-goalIndex
	}
}

// await takes replies until goal holds, or until the calls' shared context
// ends (the per-node deadline passing for every call that has not replied,
// or the parent context ending), when it records the calls still out as
// failed. Replies are always delivered before the context is released, so
// a released context finds them taken.
func (r *Round[T]) await(goal int) {
	for !r.met(goal) {
		if r.n == 1 {
			select {
			case <-r.allDone:
				r.record(r.one)
				continue
			case <-r.ctx.Done():
			}
		} else {
			r.mu.Lock()
			r.take()
			if r.met(goal) {
				r.mu.Unlock()
				return
			}
			r.goal = goal
			r.mu.Unlock()
			select {
			case <-r.signal:
				continue
			case <-r.ctx.Done():
			}
		}
		if err := r.parent.Err(); err != nil {
			r.expire(err)
		} else {
			r.expire(ErrTimeout)
		}
	}
}

// take records the inbox's replies; with mu held.
func (r *Round[T]) take() {
	for _, rep := range r.inbox {
		r.record(rep)
	}
	clear(r.inbox)
	r.inbox = r.inbox[:0]
}

// expire records every call that has not replied with err, after taking the
// replies that already arrived.
func (r *Round[T]) expire(err error) {
	if r.n == 1 {
		select {
		case <-r.allDone:
			r.record(r.one)
		default:
		}
	} else {
		r.mu.Lock()
		r.goal = goalNone
		r.take()
		r.mu.Unlock()
	}
	for i, s := range r.seen {
		if !s {
			r.record(Reply[T]{Index: i, Err: err, Elapsed: time.Since(r.started)})
		}
	}
}

func (r *Round[T]) record(rep Reply[T]) {
	if r.seen[rep.Index] {
		return // a late reply after the round already counted it as timed out
	}
	r.seen[rep.Index] = true
	r.got = append(r.got, rep)
	if rep.Err == nil {
		r.ok++
	} else {
		r.fail++
	}
}
