package core

import (
	"context"
	"slices"
	"sync"
	"time"
)

// keyQueues orders one engine's Lock calls per key and wakes them: a FIFO of
// waiters per key, the count of the engine's leases on the key, the parked
// acquire of the head (handover.go) and the count of release notices
// (notices.go). It does no I/O, and its mutex is its own.
type keyQueues struct {
	mu     sync.Mutex // guards everything below and every keyQueue and waiter
	queues map[string]*keyQueue
	// Spare queues and waiters, for the next uncontended Lock: most keys
	// are locked without contention, and a queue lives only as long as a
	// lease or a wait.
	spareQueues  []*keyQueue
	spareWaiters []*waiter
}

// maxSpares bounds each free list of keyQueues.
const maxSpares = 64

// keyQueue is one key's waiters and local holders.
type keyQueue struct {
	waiters []*waiter // arrival order; waiters[0] is the head
	holders int       // leases of this engine on the key that have not ended
	// parked is the head's next acquire, ready for the releasing lease to
	// send right behind its release (handover), or nil.
	parked *parked
	// The release notice being counted: the head is woken once a quorum of
	// nodes announced the same release.
	noticeID string
	notices  int
}

// waiter is one Lock call in a queue.
type waiter struct {
	q    *keyQueue
	ch   chan struct{} // buffered 1: look at poke
	poke wakeKind      // guarded by keyQueues.mu
	// round is how long this waiter's last acquire attempt took; only its
	// own goroutine touches it.
	round time.Duration
}

func newKeyQueues() *keyQueues {
	return &keyQueues{queues: map[string]*keyQueue{}}
}

// queue returns key's queue, creating it. qs.mu must be held.
func (qs *keyQueues) queue(key string) *keyQueue {
	q := qs.queues[key]
	if q == nil {
		if n := len(qs.spareQueues); n > 0 {
			q = qs.spareQueues[n-1]
			qs.spareQueues[n-1] = nil
			qs.spareQueues = qs.spareQueues[:n-1]
		} else {
			q = &keyQueue{}
		}
		qs.queues[key] = q
	}
	return q
}

// tidy resets what key no longer needs once q has no waiters: the notice
// count and, without holders, the queue itself. It reports whether q has no
// waiters. qs.mu must be held.
func (qs *keyQueues) tidy(key string, q *keyQueue) bool {
	if len(q.waiters) > 0 {
		return false
	}
	q.noticeID, q.notices = "", 0
	if q.holders == 0 {
		delete(qs.queues, key)
		if len(qs.spareQueues) < maxSpares {
			*q = keyQueue{waiters: q.waiters[:0]}
			qs.spareQueues = append(qs.spareQueues, q)
		}
	}
	return true
}

// poke wakes q's head for reason k. qs.mu must be held.
func (q *keyQueue) poke(k wakeKind) {
	if len(q.waiters) == 0 {
		return
	}
	h := q.waiters[0]
	h.poke = max(h.poke, k)
	select {
	case h.ch <- struct{}{}:
	default:
	}
}

// join queues a Lock call for key.
func (qs *keyQueues) join(key string) *waiter {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	var wt *waiter
	if n := len(qs.spareWaiters); n > 0 {
		wt = qs.spareWaiters[n-1]
		qs.spareWaiters[n-1] = nil
		qs.spareWaiters = qs.spareWaiters[:n-1]
	} else {
		wt = &waiter{ch: make(chan struct{}, 1)}
	}
	wt.q = qs.queue(key)
	wt.q.waiters = append(wt.q.waiters, wt)
	return wt
}

// leave removes wt from key's queue; if it was the head, the next waiter
// becomes the head, and is woken unless a lease of the engine holds the key
// (its end will wake it). It reports whether the queue has no waiters left.
func (qs *keyQueues) leave(key string, wt *waiter) (idle bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := wt.q
	i := slices.Index(q.waiters, wt)
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if i == 0 {
		// The new head asks the nodes now, or, while a lease of the engine
		// holds the key, parks its acquire for that lease's Release.
		q.poke(wakeLocal)
	}
	idle = qs.tidy(key, q)
	if len(qs.spareWaiters) < maxSpares {
		select { // a wake-up that came too late: not for the next user
		case <-wt.ch:
		default:
		}
		*wt = waiter{ch: wt.ch}
		qs.spareWaiters = append(qs.spareWaiters, wt)
	}
	return idle
}

// hold counts a new lease on key.
func (qs *keyQueues) hold(key string) {
	qs.mu.Lock()
	qs.queue(key).holders++
	qs.mu.Unlock()
}

// unhold counts a lease on key as ended and, when it was the last, wakes the
// head. It reports whether key's queue has no waiters.
func (qs *keyQueues) unhold(key string) (idle bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.queues[key]
	q.holders--
	if q.holders == 0 {
		q.poke(wakeLocal)
	}
	return qs.tidy(key, q)
}

// turn reports whether wt may ask the nodes now: it is the head and no lease
// of this engine holds the key. Otherwise it returns why not.
func (qs *keyQueues) turn(wt *waiter) (bool, turnError) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := wt.q
	i := slices.Index(q.waiters, wt)
	if i == 0 {
		wt.poke = wakeNone // this attempt answers every wake-up so far
		if q.holders == 0 {
			return true, turnError{}
		}
	}
	return false, turnError{ahead: i, held: q.holders > 0}
}

// woken returns why wt was woken, or wakeNone when there is nothing to do
// yet (not the head, or the key is held by a lease of this engine).
func (qs *keyQueues) woken(wt *waiter) wakeKind {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if wt.q.waiters[0] != wt {
		return wakeNone
	}
	k := wt.poke
	wt.poke = wakeNone
	if wt.q.holders > 0 {
		return wakeNone // its end wakes the head again
	}
	return k
}

// wake wakes the head of key's queue, if any, for reason k.
func (qs *keyQueues) wake(key string, k wakeKind) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.queues[key]; q != nil {
		q.poke(k)
	}
}

// notice counts node announcements of the release id of key; the head is
// woken (wakeRemote) when need nodes announced the same release.
func (qs *keyQueues) notice(key, id string, need int) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.queues[key]
	if q == nil || len(q.waiters) == 0 {
		return
	}
	if id == q.noticeID {
		q.notices++
	} else {
		q.noticeID, q.notices = id, 1
	}
	if q.notices == need {
		q.poke(wakeRemote)
	}
}

// waiting returns how many Lock calls wait for key.
func (qs *keyQueues) waiting(key string) int {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.queues[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// park registers wt's next acquire for a handover, if wt is the head and a
// lease of the engine holds the key; otherwise it returns nil.
func (qs *keyQueues) park(m *Mutex, wt *waiter, ctx context.Context) *parked {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := wt.q
	if q.waiters[0] != wt || q.holders == 0 || q.parked != nil {
		return nil
	}
	q.parked = &parked{wt: wt, m: m, ctx: ctx, value: newValue(), got: make(chan handed, 1)}
	return q.parked
}

// unpark withdraws p. If a releaser already took it, it waits for the round
// the releaser started (promptly: the releaser does no I/O in between) and
// returns it: the caller must see it through, as any acquire it started.
func (qs *keyQueues) unpark(p *parked) *handed {
	if p == nil {
		return nil
	}
	qs.mu.Lock()
	if p.wt.q.parked == p {
		p.wt.q.parked = nil
		qs.mu.Unlock()
		return nil
	}
	qs.mu.Unlock()
	h := <-p.got
	return &h
}

// takeParked returns the parked acquire of key's head and withdraws it, if
// the releasing lease is the engine's only holder of key; otherwise nil.
func (qs *keyQueues) takeParked(key string) *parked {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.queues[key]
	if q == nil || q.parked == nil || q.holders != 1 || len(q.waiters) == 0 || q.waiters[0] != q.parked.wt {
		return nil
	}
	p := q.parked
	q.parked = nil
	return p
}

// hasParked reports whether key's head has parked an acquire. For tests.
func (qs *keyQueues) hasParked(key string) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.queues[key]
	return q != nil && q.parked != nil
}
