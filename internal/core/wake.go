package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Waiting. With wake-up on (the default), the Lock calls of one Engine that
// want the same key queue in arrival order, and only the head of the queue
// asks the nodes; the others wait for their turn. The head retries at once
// when a lease of the engine on the key ends (on Release, once a majority of
// nodes deleted it) and when a release by another client is announced on a
// pub/sub channel (notices.go), and otherwise at its back-off delay, the poll
// that bounds every wait. None of this matters for safety: the acquire on the
// nodes alone decides who holds the lock; the queue only orders and wakes.

// maxQuickSplits is how many split votes in a row Lock answers with a quick
// retry instead of its back-off delay.
const maxQuickSplits = 2

// wakeKind is why a waiter was woken, in increasing priority.
type wakeKind uint8

const (
	wakeNone wakeKind = iota
	// wakeRemote: another client announced a release on a quorum of nodes.
	// Other clients' waiters may wake at the same moment, so with several
	// nodes the retry first waits a random time of up to two acquire rounds
	// (spread), against split votes.
	wakeRemote
	// wakeLocal: a lease of this engine ended, the turn passed, or the
	// subscription became active (a notice may have been missed before).
	// No other waiter of this engine contends: retry at once.
	wakeLocal
)

// waker is wake-up on for one engine: the per-key queues of its Lock calls
// (queue.go), the release notices that wake them (notices.go), and the
// hand-over of an acquire to a releasing lease (handover.go).
type waker struct {
	*keyQueues
	notes *notices
	multi bool // more than one node: remote wake-ups are spread (see wakeRemote)
}

func newWaker(nodes []Node, need int, log *slog.Logger) *waker {
	qs := newKeyQueues()
	return &waker{keyQueues: qs, notes: newNotices(nodes, need, log, qs), multi: len(nodes) > 1}
}

// leave removes wt from key's queue, and lets the key's channel go once
// nobody waits for the key.
func (w *waker) leave(key string, wt *waiter) {
	if w.keyQueues.leave(key, wt) {
		w.notes.unwant(key)
	}
}

// unhold counts a lease on key as ended (waking the head when it was the
// last), and lets the key's channel go once nobody waits for the key.
func (w *waker) unhold(key string) {
	if w.keyQueues.unhold(key) {
		w.notes.unwant(key)
	}
}

// wait blocks until wt should try again: after d (the poll), on a wake-up,
// or until ctx ends (it then returns ctx.Err()). With p, or once wt has
// parked an acquire of m's (it parks when woken as the head while a lease of
// the engine holds the key), it also ends when the releasing lease sends the
// parked acquire, and returns the round it started; it withdraws the parked
// acquire otherwise, unless a releaser took it first (then it returns that
// round, and no error even if ctx ended: the round must be seen through).
func (w *waker) wait(ctx context.Context, m *Mutex, wt *waiter, d time.Duration, p *parked) (h *handed, err error) {
	var got chan handed // nil without p: never ready
	if p != nil {
		got = p.got
	}
	defer func() {
		if h == nil && p != nil {
			if h = w.unpark(p); h != nil {
				err = nil
			}
		}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, nil
		case hd := <-got:
			return &hd, nil
		case <-wt.ch:
		}
		k := w.woken(wt)
		if k == wakeNone && p == nil {
			// Maybe the head now, behind a lease of the engine: park.
			if p = w.park(m, wt, ctx); p != nil {
				got = p.got
			}
			continue
		}
		switch k {
		case wakeNone:
			continue
		case wakeRemote:
			if w.multi && wt.round > 0 {
				t.Reset(spread(wt.round))
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-t.C:
				}
			}
		}
		return nil, nil
	}
}

// turnError is a Lock attempt that did not go to the nodes because the key
// is held by a lease of the same Client, or earlier Lock calls of the Client
// wait for it. It wraps ErrTaken.
type turnError struct {
	ahead int
	held  bool
}

func (e turnError) Error() string {
	switch {
	case e.held && e.ahead > 0:
		return fmt.Sprintf("%v (by a lease of this client; %d earlier Lock calls of this client wait for it)", ErrTaken, e.ahead)
	case e.held:
		return fmt.Sprintf("%v (by a lease of this client)", ErrTaken)
	}
	return fmt.Sprintf("%v (%d earlier Lock calls of this client wait for it)", ErrTaken, e.ahead)
}

func (e turnError) Unwrap() error { return ErrTaken }

// lockInTurn is Lock with wake-up on: it queues behind the engine's earlier
// Lock calls for the key and asks the nodes only at the head of the queue.
// Every attempt, whether it went to the nodes or was answered by the queue,
// counts for the retry policy, so that a policy with a limit still ends Lock.
func (m *Mutex) lockInTurn(ctx context.Context, w *waker, b backoff.BackOff) (*Lease, error) {
	wt := w.join(m.key)
	defer w.leave(m.key, wt) // the subscriptions run under the waker's own lifetime, not a caller's
	var (
		last   error     // the last refusal by the nodes
		queued turnError // the queue's last answer, while the nodes were never asked
		splits int       // split votes in a row
	)
	failure := func() error {
		if last != nil {
			return last
		}
		return fmt.Errorf("%w: %w", ErrNotAcquired, queued)
	}
	var h *handed // an acquire the releasing lease sent for us
	for attempt := 1; ; attempt++ {
		try, why := w.turn(wt)
		if h != nil {
			try = true // it went to the nodes
		}
		if try {
			began := time.Now()
			l, err := m.acquire(ctx, attempt, h)
			if err == nil || ctx.Err() != nil {
				return l, err
			}
			wt.round = time.Since(began)
			last = err
			if errors.Is(err, ErrTaken) {
				w.notes.watch(m.key) // the subscriptions run under the waker's own lifetime, not a caller's
			}
		} else {
			queued = why
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w (after %d attempts): %w", failure(), attempt, err)
			}
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return nil, fmt.Errorf("%w (gave up after %d attempts)", failure(), attempt)
		}
		switch {
		case !try || !splitVote(last):
			splits = 0
		case splits < maxQuickSplits:
			// Nobody may have won, and no release will be announced: retry
			// soon rather than at the poll, spread against another split.
			// Not for long: a split that persists (keys left behind by
			// crashed contenders) waits for the back-off.
			splits++
			d = min(d, spread(wt.round))
		}
		if m.e.tel.log.Enabled(ctx, slog.LevelDebug) {
			m.e.tel.log.DebugContext(ctx, "redfence: lock attempt failed, retrying",
				"key", m.key, "attempt", attempt, "asked_nodes", try, "retry_in", d, "err", failure())
		}
		var p *parked
		if !try && why.held && why.ahead == 0 {
			p = w.park(m, wt, ctx) // the holder's Release may send it
		}
		var err error
		if h, err = w.wait(ctx, m, wt, d, p); err != nil {
			return nil, fmt.Errorf("%w (after %d attempts): %w", failure(), attempt, err)
		}
	}
}

// spread returns a random duration in (0, 2*round]: contenders of other
// clients retrying after the same event fall out of step by about one
// acquire round each.
func spread(round time.Duration) time.Duration {
	return mrand.N(2*round) + 1
}

// splitVote reports whether a failed acquire won some nodes and lost every
// other one to another owner: contenders may have split the votes so that
// none of them holds the lock. Failures other than contention (a node down,
// a timeout) rule it out: those call for the back-off.
func splitVote(err error) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) || qe.Got == 0 {
		return false
	}
	for _, n := range qe.Nodes {
		if !errors.Is(n.Err, ErrTaken) {
			return false
		}
	}
	return true
}

// WakeState reports how many Lock calls of the engine wait for the full key
// and on how many nodes the key's release channel is subscribed (confirmed by
// the node). Both are 0 with wake-up off. For tests.
func (e *Engine) WakeState(key string) (waiting, subscribed int) {
	w := e.wake
	if w == nil {
		return 0, 0
	}
	waiting = w.waiting(key)
	w.notes.mu.Lock()
	defer w.notes.mu.Unlock()
	if s := w.notes.subs[key]; s != nil {
		subscribed = s.nconf
	}
	return waiting, subscribed
}
