package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
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

// waker queues one engine's Lock calls per key and wakes them.
type waker struct {
	nodes  []Node
	need   int
	prefix string // of this engine's notices: prefix + sequence number
	seq    atomic.Uint64
	log    *slog.Logger
	// life bounds the subscription goroutines and their dials: end, called
	// by close, cancels it. The one context kept in a struct, for the
	// engine's own background work.
	life context.Context
	end  context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex // guards the fields below; never held across I/O
	queues map[string]*keyQueue
	subs   map[string]*keySub
	ns     []*nodeSub // nil for a node whose client type has no usable pub/sub
	closed bool
	// Spare queues and waiters, for the next uncontended Lock: most keys
	// are locked without contention, and a queue lives only as long as a
	// lease or a wait.
	spareQueues  []*keyQueue
	spareWaiters []*waiter
}

// maxSpares bounds each free list of the waker.
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
	poke wakeKind      // guarded by waker.mu
	// round is how long this waiter's last acquire attempt took; only its
	// own goroutine touches it.
	round time.Duration
}

func newWaker(nodes []Node, need int, log *slog.Logger) *waker {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never returns an error
	w := &waker{
		nodes: nodes, need: need, log: log,
		prefix: base64.RawURLEncoding.EncodeToString(b) + ".",
		queues: map[string]*keyQueue{},
		subs:   map[string]*keySub{},
		ns:     make([]*nodeSub, len(nodes)),
	}
	for i, n := range nodes {
		switch n.Client.(type) {
		case *redis.Client, *redis.ClusterClient:
			// A Cluster client subscribes on one node; PUBLISH (not SPUBLISH)
			// reaches every node of the cluster.
			w.ns[i] = &nodeSub{i: i, client: n.Client, pending: map[string]struct{}{},
				linger: map[string]time.Time{}, kick: make(chan struct{}, 1)}
		}
		// A Ring (or another client type) subscribes per shard by channel
		// name, not where the key lives: its waiters poll.
	}
	w.life, w.end = context.WithCancel(context.Background())
	return w
}

// noticeID returns a fresh message for a release notice.
func (w *waker) noticeID() string {
	var n [13]byte // a uint64 in base 36
	var b strings.Builder
	b.Grow(len(w.prefix) + len(n))
	b.WriteString(w.prefix)
	b.Write(strconv.AppendUint(n[:0], w.seq.Add(1), 36))
	return b.String()
}

// queue returns key's queue, creating it. w.mu must be held.
func (w *waker) queue(key string) *keyQueue {
	q := w.queues[key]
	if q == nil {
		if n := len(w.spareQueues); n > 0 {
			q = w.spareQueues[n-1]
			w.spareQueues[n-1] = nil
			w.spareQueues = w.spareQueues[:n-1]
		} else {
			q = &keyQueue{}
		}
		w.queues[key] = q
	}
	return q
}

// drop forgets key's queue, which has neither waiters nor holders. w.mu must
// be held.
func (w *waker) drop(key string, q *keyQueue) {
	delete(w.queues, key)
	if len(w.spareQueues) < maxSpares {
		*q = keyQueue{waiters: q.waiters[:0]}
		w.spareQueues = append(w.spareQueues, q)
	}
}

// poke wakes q's head for reason k. w.mu must be held.
func (w *waker) poke(q *keyQueue, k wakeKind) {
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
func (w *waker) join(key string) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	var wt *waiter
	if n := len(w.spareWaiters); n > 0 {
		wt = w.spareWaiters[n-1]
		w.spareWaiters[n-1] = nil
		w.spareWaiters = w.spareWaiters[:n-1]
	} else {
		wt = &waiter{ch: make(chan struct{}, 1)}
	}
	wt.q = w.queue(key)
	wt.q.waiters = append(wt.q.waiters, wt)
	return wt
}

// leave removes wt from its queue; if it was the head, the next waiter
// becomes the head, and is woken unless a lease of the engine holds the key
// (its end will wake it).
func (w *waker) leave(key string, wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := wt.q
	i := slices.Index(q.waiters, wt)
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if i == 0 {
		// The new head asks the nodes now, or, while a lease of the engine
		// holds the key, parks its acquire for that lease's Release.
		w.poke(q, wakeLocal)
	}
	w.tidy(key, q)
	if len(w.spareWaiters) < maxSpares {
		select { // a wake-up that came too late: not for the next user
		case <-wt.ch:
		default:
		}
		*wt = waiter{ch: wt.ch}
		w.spareWaiters = append(w.spareWaiters, wt)
	}
}

// tidy drops what key no longer needs once q has no waiters: the
// subscription (after the linger) and, without holders, the queue. w.mu must
// be held.
func (w *waker) tidy(key string, q *keyQueue) {
	if len(q.waiters) > 0 {
		return
	}
	q.noticeID, q.notices = "", 0
	if q.holders == 0 {
		w.drop(key, q)
	}
	s := w.subs[key]
	if s == nil || !s.wanted {
		return
	}
	s.wanted, s.idle = false, time.Now()
	for i, n := range w.ns {
		if n != nil && s.sent[i] {
			n.pending[key] = struct{}{}
			w.kick(n, false)
		}
	}
	w.gc(key, s)
}

// hold counts a new lease on key.
func (w *waker) hold(key string) {
	w.mu.Lock()
	w.queue(key).holders++
	w.mu.Unlock()
}

// unhold counts a lease on key as ended and, when it was the last, wakes the
// head.
func (w *waker) unhold(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	q.holders--
	if q.holders == 0 {
		w.poke(q, wakeLocal)
	}
	w.tidy(key, q)
}

// turn reports whether wt may ask the nodes now: it is the head and no lease
// of this engine holds the key. Otherwise it returns why not.
func (w *waker) turn(wt *waiter) (bool, turnError) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
func (w *waker) woken(wt *waiter) wakeKind {
	w.mu.Lock()
	defer w.mu.Unlock()
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
			if len(w.nodes) > 1 && wt.round > 0 {
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
				w.watch(m.key) // the subscriptions run under the waker's own lifetime, not a caller's
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil {
		waiting = len(q.waiters)
	}
	if s := w.subs[key]; s != nil {
		subscribed = s.nconf
	}
	return waiting, subscribed
}
