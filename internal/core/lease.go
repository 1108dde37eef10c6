package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/redfence/redfence/internal/quorum"
)

// Lease is one successful acquisition.
type Lease struct {
	m     *Mutex
	value string
	// ticket is the waiter's of a lease made of grants (waiting.go): its
	// release takes its entries left in the queues; 0 for none.
	ticket int64
	token  uint64
	// tokens are a fenced multi-key lease's, one per key in key order
	// (token is the first); nil otherwise.
	tokens []uint64
	// acquired is when the acquire returned, for the hold-time metric.
	acquired time.Time
	// acquire is the acquire's round: Release settles it (waits for its
	// straggling requests, bounded by the node timeout), so that it cannot
	// be overtaken by a late SET.
	acquire *quorum.Round[int64]

	mu         sync.Mutex // guards the fields below; never held across I/O
	validUntil time.Time
	timer      *time.Timer
	done       chan struct{}
	err        error // why done closed
	released   bool
	watchers   map[*int]context.CancelCauseFunc // Context()s to cancel when the lease ends
}

func newLease(m *Mutex, value string, validUntil time.Time, acquire *quorum.Round[int64]) *Lease {
	l := &Lease{m: m, value: value, validUntil: validUntil, acquire: acquire, done: make(chan struct{}), acquired: time.Now()}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(validUntil), l.checkExpiry)
	l.mu.Unlock()
	return l
}

// The methods of Lease answer on the nil lease that a failed Lock or TryLock
// returns as on a lease that ended: zero values, a closed Done, and
// ErrNilLease from Err and from the methods that return an error.

// Key returns the full Redis key.
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.m.key
}

// Keys returns every full Redis key of the lease, in the Mutex's order: the
// one key, or a multi-key lock's keys.
func (l *Lease) Keys() []string {
	if l == nil {
		return nil
	}
	return l.m.Keys()
}

// Tokens returns the fencing tokens, one per key in Keys' order; nil when
// fencing is off.
func (l *Lease) Tokens() []uint64 {
	switch {
	case l == nil || l.token == 0:
		return nil
	case l.tokens != nil:
		return slices.Clone(l.tokens)
	}
	return []uint64{l.token}
}

// Value returns the random owner value stored on the nodes.
func (l *Lease) Value() string {
	if l == nil {
		return ""
	}
	return l.value
}

// Token returns the fencing token, 0 when fencing is off; for a multi-key
// lease, the first key's (Tokens has every key's).
func (l *Lease) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.token
}

// TTL returns the lease's configured TTL.
func (l *Lease) TTL() time.Duration {
	if l == nil {
		return 0
	}
	return l.m.cfg.TTL
}

// ValidUntil returns the end of the validity window, with a monotonic
// reading.
func (l *Lease) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Done is closed once when the lease ends: released, lost, or expired.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		return closedDone
	}
	return l.done
}

// Err returns why Done closed, nil while the lease is held.
func (l *Lease) Err() error {
	if l == nil {
		return ErrNilLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end closes done with err unless it is closed already, and cancels every
// context handed out by Context. l.mu must be held. ctx is only for
// telemetry.
func (l *Lease) end(ctx context.Context, err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.timer.Stop()
	close(l.done)
	if w := l.m.e.wait; w != nil && !errors.Is(err, ErrReleased) {
		// Lost or expired: nothing hands the key over, so this engine's
		// waiters look again now, and once more when the keys have surely
		// expired on the nodes (they outlive the validity by up to the
		// drift allowance and the acquire's round).
		key := l.m.key
		w.poke(key)
		time.AfterFunc(2*l.m.cfg.DriftAllowance()+l.m.cfg.RoundTimeout(), func() { w.poke(key) })
	}
	if errors.Is(err, ErrLost) {
		tel := l.m.e.tel
		tel.lost.Add(ctx, 1)
		tel.log.WarnContext(ctx, "redfence: lease lost", "key", l.m.key, "err", err)
	}
	for _, cancel := range l.watchers {
		cancel(err)
	}
	l.watchers = nil
}

// lose ends the lease with an error wrapping ErrLost and why, unless it has
// ended.
func (l *Lease) lose(ctx context.Context, why error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(ctx, fmt.Errorf("%w: %w", ErrLost, why))
	return l.err
}

func (l *Lease) checkExpiry() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := time.Until(l.validUntil); d > 0 { // extended since the timer was set
		l.timer.Reset(d)
		return
	}
	l.end(context.Background(), fmt.Errorf("%w: validity ran out", ErrLost)) // on the timer: no caller
}

// Extend asks every node for a fresh TTL on the key, only where it still
// holds this lease's value. It succeeds when a quorum agrees within a fresh
// validity window. It returns an error wrapping ErrLost, and ends the lease,
// when too many nodes no longer hold the value for a quorum to remain; any
// other failure leaves the lease valid until its current ValidUntil.
func (l *Lease) Extend(ctx context.Context) (err error) {
	if err := l.Err(); err != nil {
		return err
	}
	m := l.m
	leave, err := m.e.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	ctx, span := m.e.tel.start(ctx, "redfence.extend", m.keyAttrs...)
	defer func() { endSpan(span, err) }()
	start := m.e.now()
	var r *quorum.Round[int64]
	if m.shape != nil {
		r = m.e.run(ctx, m.need, m.cfg.RoundTimeout(), withValue(m.shape.extendTmpl, l.value), decodeOne)
	} else {
		r = m.script(ctx, extendScript, m.need, l.value, m.cfg.TTL.Milliseconds())
	}
	reached := r.Decide()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()))
	}
	m.e.tel.nodeReplies(ctx, span, "extend", m.e.nodes, r.Replies())
	elapsed := m.e.now().Sub(start)
	if reached && m.cfg.Validity(elapsed) > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil { // released or expired while we waited
			return l.err
		}
		if until := start.Add(m.cfg.TTL - m.cfg.DriftAllowance()); until.After(l.validUntil) {
			l.validUntil = until
		}
		return nil
	}
	n := len(m.e.nodes)
	if notHeld(r.Replies()) > n-m.need {
		err := fmt.Errorf("%w: extend: %w", ErrLost, m.quorumError("extend", r))
		l.mu.Lock()
		l.end(ctx, err)
		err = l.err
		l.mu.Unlock()
		return err
	}
	if reached {
		return fmt.Errorf("extend took %v, leaving no validity of the %v TTL; the lease stays valid until %v",
			elapsed, m.cfg.TTL, l.ValidUntil().Round(0))
	}
	return fmt.Errorf("%w; the lease stays valid until its current deadline", m.quorumError("extend", r))
}

// Release deletes the key on every node that still holds this lease's value.
// It returns nil when a quorum deleted it within the validity window, an error
// wrapping ErrLost when the lease had already expired or been lost, ErrReleased
// when called a second time, and a *QuorumError when nodes could not answer
// (their copies expire with the TTL).
//
// The deletes go out on a context detached from ctx (context.WithoutCancel),
// each bounded by the node timeout: ctx's cancellation and deadline do not
// stop them, so a cancelled or expired ctx, or one from l.Context (which the
// lease's end cancels), still releases. Release first waits, again at most
// the node timeout, for requests of the acquire still in flight, so that no
// delete can be overtaken by the acquire's own late write: it returns within
// about twice the node timeout whatever ctx.
func (l *Lease) Release(ctx context.Context) (err error) {
	if l == nil {
		return ErrNilLease
	}
	leave, err := l.m.e.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return ErrReleased
	}
	l.released = true
	prior := l.err // non-nil: lost or expired before Release
	expired := prior == nil && !time.Now().Before(l.validUntil)
	if expired {
		l.end(ctx, fmt.Errorf("%w: validity ran out", ErrLost))
		prior = l.err
	}
	l.end(ctx, ErrReleased)
	l.mu.Unlock()

	m := l.m
	ctx, span := m.e.tel.start(context.WithoutCancel(ctx), "redfence.release", m.keyAttrs...)
	defer func() { endSpan(span, err) }()
	if m.e.tel.metering {
		m.e.tel.holdDur.Record(ctx, seconds(time.Since(l.acquired)))
	}
	l.acquire.Settle()
	r := m.releaseAll(ctx, l.value, l.ticket) // hands the key to the first waiter queued on each node
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()))
	}
	m.e.tel.nodeReplies(ctx, span, "release", m.e.nodes, r.Replies())
	switch {
	case prior != nil:
		return prior
	case r.OK() >= m.need:
		return nil
	case notHeld(r.Replies()) > len(m.e.nodes)-m.need:
		return fmt.Errorf("%w: release: %w", ErrLost, m.quorumError("release", r))
	default:
		return m.quorumError("release", r)
	}
}

// Context returns a context derived from parent that is cancelled when the
// lease ends, with the reason as its cause (context.Cause): an error wrapping
// ErrLost, or ErrReleased. The CancelFunc releases its resources; call it when
// done. No goroutine is started.
//
// A nil parent is taken as context.Background(): the returned context is
// then cancelled only by the lease's end or the CancelFunc. On the nil lease
// it is cancelled at once, with cause ErrNilLease.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	if l == nil {
		cancel(ErrNilLease)
		return ctx, func() {}
	}
	id := new(int)
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		cancel(err)
		return ctx, func() { cancel(context.Canceled) }
	}
	if l.watchers == nil {
		l.watchers = map[*int]context.CancelCauseFunc{}
	}
	l.watchers[id] = cancel
	l.mu.Unlock()
	return ctx, func() {
		l.mu.Lock()
		delete(l.watchers, id)
		l.mu.Unlock()
		cancel(context.Canceled)
	}
}

// renewInterval is how long KeepAlive waits between successful extends.
func (l *Lease) renewInterval() time.Duration { return l.m.cfg.TTL / 3 }

// lossMargin is how long before ValidUntil KeepAlive gives up and declares
// the lease lost when extends keep failing: time for the holder to stop
// before another client can acquire.
func (l *Lease) lossMargin() time.Duration {
	return max(l.m.cfg.TTL/5, 2*l.m.cfg.RoundTimeout())
}

// KeepAlive extends the lease about every TTL/3 until ctx ends or the lease
// does. A failed extend is retried while validity remains; if the lease
// cannot be extended before its remaining validity falls below
// max(TTL/5, 2*round timeout), KeepAlive ends it as lost, so Done closes and
// Context-derived contexts are cancelled before ValidUntil, leaving the
// holder that margin to stop. It returns an error wrapping ErrLost when the
// lease is lost, ErrReleased if it was released, ctx.Err() when ctx
// ends (the lease is then left as it is, still held), and ErrClosed as soon
// as the Client is closed (the lease can then be neither extended nor
// released: it stays held until ValidUntil).
func (l *Lease) KeepAlive(ctx context.Context) error {
	if l == nil {
		return ErrNilLease
	}
	if ctx == nil {
		return l.m.e.nilContext()
	}
	closed := l.m.e.closedChan()
	wait := l.renewInterval()
	retry := max(l.m.cfg.RoundTimeout(), l.m.cfg.TTL/20)
	for {
		// Never sleep past the point where the lease must be given up.
		giveUp := l.ValidUntil().Add(-l.lossMargin())
		wait = min(wait, time.Until(giveUp))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-l.done:
				t.Stop()
				return l.Err()
			case <-closed:
				t.Stop()
				return ErrClosed
			case <-t.C:
			}
		}
		if err := l.Err(); err != nil {
			return err
		}
		err := l.Extend(ctx)
		switch {
		case err == nil:
			wait = l.renewInterval()
			continue
		case errors.Is(err, ErrLost), errors.Is(err, ErrReleased), errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		// A transient failure: retry soon, unless there is no time left.
		if !time.Now().Before(l.ValidUntil().Add(-l.lossMargin())) {
			return l.lose(ctx, fmt.Errorf("could not extend before validity ran out: %w", err))
		}
		wait = retry
	}
}

// Do acquires the lock (Lock), runs fn while KeepAlive renews the lease, and
// releases it when fn returns. fn's context is cancelled the moment the lease
// is lost (before validity ends; see KeepAlive), the Client is closed (cause
// ErrClosed), or the caller's ctx ends. fn may release the lease itself
// (with any context, fn's included); Do then does not release it again.
// Release runs on a context detached from ctx, so it happens even when ctx
// was cancelled. Do joins its goroutine before returning. Its error wraps
// what happened: ErrNotAcquired (fn never ran), fn's error, an error wrapping
// ErrLost when the lease was lost while fn ran, ErrClosed when the Client was
// closed while fn ran, or the release's error.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context, l *Lease) error) (err error) {
	if fn == nil {
		return &ConfigError{Pkg: m.e.pkg, Field: "fn", Msg: "nil"}
	}
	l, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	lctx, cancelFn := l.Context(ctx)
	fctx, cancelClosed := context.WithCancelCause(lctx)
	kctx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	kept := make(chan error, 1)
	go func() {
		err := l.KeepAlive(kctx)
		if errors.Is(err, ErrClosed) {
			cancelClosed(err) // no more extends: fn must stop
		}
		kept <- err
	}()

	finished := false
	defer func() {
		// Runs on return and on a panic in fn alike: stop and join the
		// keep-alive goroutine, then release.
		stopKeepAlive()
		keepErr := <-kept
		cancelClosed(context.Canceled)
		cancelFn()
		relErr := l.Release(ctx) // on a detached context (see Release)
		if errors.Is(relErr, ErrReleased) {
			relErr = nil // fn released it
		}
		if !finished {
			return // panicking: let it propagate
		}
		err = doResult(err, keepErr, relErr)
	}()
	err = fn(fctx, l)
	finished = true
	return err
}

// doResult combines fn's error with what happened to the lease.
func doResult(fnErr, keepErr, relErr error) error {
	var lost error
	switch {
	case errors.Is(keepErr, ErrLost):
		lost = keepErr
	case errors.Is(relErr, ErrLost):
		lost = relErr
	case errors.Is(keepErr, ErrClosed):
		lost = keepErr
	case errors.Is(relErr, ErrClosed):
		lost = relErr
	}
	switch {
	case lost != nil && fnErr != nil:
		return errors.Join(lost, fnErr)
	case lost != nil:
		return lost
	case fnErr != nil:
		return fnErr
	}
	return relErr
}
