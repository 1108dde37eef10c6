package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
)

// The queue of waiters on the nodes: docs/design.md, Waiting.

const (
	maxWaiters = 1024 // a key's queue on a node; a waiter that finds it full polls
	// minRefresh is the least time between a waiter's refreshes: the notice
	// wakes it, the refresh only bounds the wait when a notice was lost.
	minRefresh = 50 * time.Millisecond
)

// waiting is one Client's waiters and their notices.
type waiting struct {
	notes       *notices
	tickets     atomic.Int64 // the last ticket given
	deniedUntil atomic.Int64 // Unix ns: a node refused the queues; poll until then

	mu      sync.Mutex
	byValue map[string]*waiter
	byKey   map[string]map[*waiter]struct{}
}

func newWaiting(nodes []node, log *slog.Logger) *waiting {
	w := &waiting{byValue: map[string]*waiter{}, byKey: map[string]map[*waiter]struct{}{}}
	w.notes = newNotices(nodes, log, w)
	return w
}

// waiter is one Lock call in the queues of its key.
type waiter struct {
	key, value string
	ticket     int64
	ch         chan struct{} // buffered 1: look at notes

	mu      sync.Mutex
	notes   []grantNote
	refresh bool
}

// grantNote is a grant by node from the waiter's entry of round.
type grantNote struct{ node, round int }

// ticket returns the wall clock in microseconds, above the last ticket, so
// that one Client's waiters queue in the order they came.
func (w *waiting) ticket() int64 {
	now := time.Now().UnixMicro()
	for {
		last := w.tickets.Load()
		t := max(now, last+1)
		if w.tickets.CompareAndSwap(last, t) {
			return t
		}
	}
}

func (w *waiting) join(key, value string) *waiter {
	wt := &waiter{key: key, value: value, ticket: w.ticket(), ch: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byValue[value] = wt
	if w.byKey[key] == nil {
		w.byKey[key] = map[*waiter]struct{}{}
	}
	w.byKey[key][wt] = struct{}{}
	return wt
}

func (w *waiting) leave(wt *waiter) {
	w.mu.Lock()
	delete(w.byValue, wt.value)
	ks := w.byKey[wt.key]
	delete(ks, wt)
	idle := len(ks) == 0
	if idle {
		delete(w.byKey, wt.key)
	}
	w.mu.Unlock()
	if idle {
		w.notes.unwant(wt.key)
	}
}

func (w *waiting) waiting(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byKey[key])
}

func (w *waiting) grant(value string, node, round int) {
	w.mu.Lock()
	wt := w.byValue[value]
	w.mu.Unlock()
	if wt == nil {
		return
	}
	wt.mu.Lock()
	wt.notes = append(wt.notes, grantNote{node, round})
	wt.mu.Unlock()
	wt.poke()
}

// poke asks every waiter of key to refresh now: a lease on it ended without
// a release, or its channel became active (a grant may have been missed).
func (w *waiting) poke(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.byKey[key] {
		wt.mu.Lock()
		wt.refresh = true
		wt.mu.Unlock()
		wt.poke()
	}
}

func (wt *waiter) poke() {
	select {
	case wt.ch <- struct{}{}:
	default:
	}
}

// take returns the grants told since, and whether a refresh was asked for.
func (wt *waiter) take() ([]grantNote, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	notes, refresh := wt.notes, wt.refresh
	wt.notes, wt.refresh = nil, false
	return notes, refresh
}

// refused reports whether err is a node's error reply: the waiter then polls.
func refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, ErrTaken)
}

// grantState is what a waiter knows of one node: granted, with a lower
// bound of the grant's time, and whether a waiter ahead is queued there.
type grantState struct {
	granted, ahead bool
	lb             time.Time
}

var errQueueFull = errors.New("redfence: the key's queue of waiters is full")

// decodeJoin reads a join's answer: 1 granted (2: with a waiter ahead
// queued there), or ErrTaken when queued.
func decodeJoin(cmd *redis.Cmd) (int64, error) {
	st, n, err := pair(cmd)
	switch {
	case err != nil:
	case st == 1:
		return 1 + n, nil
	case st == -5:
		err = errQueueFull
	default:
		err = statusError("join", st, n)
	}
	return 0, err
}

// queues reports whether a Lock whose attempt failed with err waits in the
// queue: wake-up on, a plain key, held by another owner, and no node
// refused the queues lately.
func (m *Mutex) queues(err error) bool {
	w := m.e.wait
	return w != nil && m.shape == nil && errors.Is(err, ErrTaken) && time.Now().UnixNano() > w.deniedUntil.Load()
}

func (m *Mutex) queue() *waitState {
	w := m.e.wait
	wt := w.join(m.key, newValue())
	w.notes.watch(m.key) // the subscriptions run under the Client's own lifetime, not a caller's
	return &waitState{m: m, wt: wt, grants: make([]grantState, len(m.e.nodes))}
}

// close gives up st's entries and grants unless they made a lease (nil: none).
func (st *waitState) close(ctx context.Context) {
	if st == nil || st.closed {
		return
	}
	st.closed = true
	st.m.e.wait.leave(st.wt)
	if !st.won {
		st.m.leaveQueues(context.WithoutCancel(ctx), st.wt, st.r)
	}
}

type waitState struct {
	m      *Mutex
	wt     *waiter
	grants []grantState
	starts []time.Time
	r      *quorum.Round[int64] // the last round
	life   time.Duration
	split  time.Duration // the wait before the next look at a split; 0: none yet
	denied bool          // a node refused the queue: the Lock polls instead
	won    bool          // a lease was made of the grants
	closed bool
}

// refresh sends a join round, its entries living three polls d.
func (st *waitState) refresh(ctx context.Context, d time.Duration, attempt int) (*Lease, error) {
	m := st.m
	st.life = 3 * max(d, minRefresh)
	round := len(st.starts)
	st.starts = append(st.starts, m.e.now())
	args := withValue(m.scriptTemplate(joinScript, true, []string{m.key}, m.cfg.ttl.Milliseconds(), m.cfg.quarantine.Milliseconds(),
		m.queueKey, st.wt.ticket, round, st.life.Milliseconds(), maxWaiters, m.e.wait.notes.id), st.wt.value)
	var p proof // join.lua's proven form: its quarantine, ARGV[3], off
	if m.cfg.quarantine > 0 {
		p = proof{args: unquarantined(args, 3), decode: decodeJoin}
	}
	if st.r != nil {
		st.r.Settle() // the last round's stragglers, so that an entry's round only grows
	}
	// The round outlives ctx (its timeout bounds it): a join a cancelled
	// ctx gave up on could still land after the leave that follows it, and
	// leave an entry that nobody waits behind.
	st.r = m.e.run(detached(ctx), afterRelease, len(m.e.nodes), m.cfg.roundTimeout(), args, decodeJoin, p)
	st.r.Wait()
	for _, rep := range st.r.Replies() {
		switch {
		case rep.Err == nil:
			st.grants[rep.Index] = grantState{granted: true, ahead: rep.Value == 2, lb: st.starts[round]}
		case errors.Is(rep.Err, ErrTaken), errors.As(rep.Err, new(quarantineError)):
			st.grants[rep.Index] = grantState{}
		case refused(rep.Err):
			st.denied = true
		}
	}
	if st.denied {
		m.e.wait.deniedUntil.Store(time.Now().Add(deniedFor).UnixNano())
		m.e.tel.log.Warn("redfence: a node refused the queue of waiters; waiting Lock calls poll",
			"key", m.key, "retry_in", deniedFor)
		return nil, nil
	}
	l, err := m.queuedLease(ctx, st.wt, st.grants, st.r, attempt)
	st.won = l != nil
	if l == nil && err == nil {
		m.yield(ctx, st.wt, st.grants, round, st.life)
	}
	return l, err
}

// testHookParks, set by tests only, is called each time a waiter is about
// to block in wait.
var testHookParks atomic.Pointer[func(*waitState)]

// wait waits up to d for grants: it returns the lease once they make a
// majority, a failed claim's error, poked when a refresh was asked for, or
// none of these when d passed or ctx ended. Grants short of a majority are a split: it asks for a
// refresh after a round timeout, then after twice the last wait (at most
// d) while the split lasts, so that they are yielded to a waiter ahead
// that queued after the last look (docs/design.md, Waiting).
func (st *waitState) wait(ctx context.Context, d time.Duration, attempt int) (l *Lease, claimErr error, poked bool) {
	d = max(d, minRefresh)
	timeout := time.After(d)
	var split <-chan time.Time // armed while some grants fall short of a majority
	arm := func() {
		if split == nil && slices.ContainsFunc(st.grants, func(g grantState) bool { return g.granted }) {
			st.split = min(max(2*st.split, st.m.cfg.roundTimeout()), d)
			split = time.After(st.split)
		}
	}
	arm()
	for {
		if h := testHookParks.Load(); h != nil {
			(*h)(st)
		}
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-timeout:
			return nil, nil, false
		case <-split:
			return nil, nil, true
		case <-st.wt.ch:
		}
		if ctx.Err() != nil { // ended as the notice came: no further round
			return nil, nil, false
		}
		notes, refresh := st.wt.take()
		for _, g := range notes {
			if g.round < len(st.starts) {
				st.grants[g.node] = grantState{granted: true, lb: st.starts[g.round]}
			}
		}
		l, err := st.m.queuedLease(ctx, st.wt, st.grants, st.r, attempt+1)
		st.won = l != nil
		if l != nil || err != nil {
			return l, err, false
		}
		if refresh {
			return nil, nil, true
		}
		arm()
	}
}

// queuedLease returns the lease of a majority of grants while validity
// remains, valid from the need-th latest grant's lower bound. A fenced lock,
// or one with replica acks, claims it first with an acquire of the value.
func (m *Mutex) queuedLease(ctx context.Context, wt *waiter, grants []grantState, r *quorum.Round[int64], attempt int) (*Lease, error) {
	var lbs []time.Time
	for _, g := range grants {
		if g.granted {
			lbs = append(lbs, g.lb)
		}
	}
	if len(lbs) < m.need {
		return nil, nil
	}
	slices.SortFunc(lbs, func(a, b time.Time) int { return b.Compare(a) })
	start := lbs[m.need-1]
	if ctx.Err() != nil || m.cfg.validity(m.e.now().Sub(start)) <= 0 {
		return nil, nil // the next refresh sets the TTLs again
	}
	if m.cfg.fenced || m.cfg.replicaAcks > 0 {
		l, err := m.acquire(ctx, attempt, wt.value)
		if err != nil {
			clear(grants) // the failed claim released them
			return nil, err
		}
		l.ticket = wt.ticket
		return l, nil
	}
	l := newLease(m, wt.value, wt.value, start.Add(m.cfg.ttl-m.cfg.driftAllowance()), r)
	l.ticket = wt.ticket
	return l, nil
}

// yield hands on a minority of grants where a waiter ahead is queued
// (release.lua, "yield"), so that split grants go to the first waiter.
func (m *Mutex) yield(ctx context.Context, wt *waiter, grants []grantState, round int, life time.Duration) {
	held, ahead := 0, false
	for _, g := range grants {
		if g.granted {
			held++
			ahead = ahead || g.ahead
		}
	}
	if held == 0 || held >= m.need || !ahead {
		return
	}
	args := m.releaseArgs(wt.value, "yield", wt.ticket, round, life)
	r, reqs := m.e.prepare(ctx, len(m.e.nodes), m.cfg.roundTimeout(), args, decodeOne)
	var sent []int
	for i, g := range grants {
		if g.granted && g.ahead {
			grants[i] = grantState{}
			sent = append(sent, i)
			m.e.nodes[i].batch.submit(false, &reqs[i])
		} else {
			r.Deliver(i, 0, ErrNotHeld) // not asked
		}
	}
	r.WaitFor(sent)
}

// leaveQueues gives up a waiter's entries and grants on every node, after
// the last join round's stragglers, waiting for the nodes that answered it.
func (m *Mutex) leaveQueues(ctx context.Context, wt *waiter, last *quorum.Round[int64]) {
	var ans []int
	if last != nil {
		last.Settle()
		ans = answered(last.Replies())
	}
	args := m.releaseArgs(wt.value, "leave", wt.ticket, 0, 0)
	m.e.run(ctx, anyOrder, len(m.e.nodes), m.cfg.roundTimeout(), args, decodeOne, proof{}).WaitFor(ans)
}

// releaseArgs is release.lua's command in mode "release", "leave" or "yield".
func (m *Mutex) releaseArgs(value any, mode string, ticket int64, round int, life time.Duration) []any {
	args := withValue(m.releaseTmpl, value)
	return append(args, mode, strconv.FormatInt(ticket, 10), round, m.cfg.ttl.Milliseconds(), life.Milliseconds(), m.e.wait.notes.id)
}
