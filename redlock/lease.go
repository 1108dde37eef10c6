package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/quorum"
)

// Lease is one successful acquisition.
type Lease struct {
	m        *Mutex
	value    string
	boxed    any             // value, boxed once for the commands
	ticket   int64           // a lease of grants: its release takes its queue entries too; 0: none
	token    fencing.Token   // the first key's
	tokens   []fencing.Token // a fenced multi-key lease's, in key order
	acquired time.Time       // for the hold-time metric
	// acquire is the acquire's round: Release waits for its stragglers, so
	// that a late SET cannot overtake the delete.
	acquire *quorum.Round[int64]

	mu         sync.Mutex // guards the fields below; never held across I/O
	validUntil time.Time
	timer      *time.Timer
	done       chan struct{}
	err        error // why done closed
	released   bool
	watchers   map[*int]context.CancelCauseFunc // Context()s to cancel when the lease ends
}

func newLease(m *Mutex, value string, boxed any, validUntil time.Time, acquire *quorum.Round[int64]) *Lease {
	l := &Lease{m: m, value: value, boxed: boxed, validUntil: validUntil, acquire: acquire, acquired: time.Now()}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(validUntil), l.checkExpiry)
	l.mu.Unlock()
	return l
}

// The methods of Lease answer on the nil lease a failed Lock returns as on
// one that ended: zero values, a closed Done, and ErrNilLease.

// Key returns the lock's Redis key (prefix included; a multi-key lock's
// first key).
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.m.key
}

// Tokens returns the fencing tokens, one per key in Keys' order; nil when
// fencing is off.
func (l *Lease) Tokens() []fencing.Token {
	switch {
	case l == nil || l.token == 0:
		return nil
	case l.tokens == nil:
		return []fencing.Token{l.token}
	}
	return slices.Clone(l.tokens)
}

// Value returns the random owner value stored on the nodes.
func (l *Lease) Value() string {
	if l == nil {
		return ""
	}
	return l.value
}

// Token returns the lease's fencing token, 0 when fencing is off (for a
// multi-key lease, the first key's).
func (l *Lease) Token() fencing.Token {
	if l == nil {
		return 0
	}
	return l.token
}

// ValidUntil returns when the lease's validity ends. The time keeps its
// monotonic reading, so comparisons with time.Now ignore wall-clock jumps.
func (l *Lease) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Done returns a channel closed, once, when the lease ends: released,
// found lost by Extend or KeepAlive, or expired.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		return closedDone
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil { // made on first use: most leases are never watched
		if l.err != nil {
			return closedDone
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// Err returns why Done closed (ErrReleased, or an error wrapping ErrLost),
// nil while the lease is held.
func (l *Lease) Err() error {
	if l == nil {
		return ErrNilLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end ends the lease with err, once, and cancels every Context (l.mu held).
func (l *Lease) end(ctx context.Context, err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.timer.Stop()
	if l.done != nil {
		close(l.done)
	}
	if w := l.m.e.wait; w != nil && !errors.Is(err, ErrReleased) {
		// Lost or expired: nothing hands the key over, so this Client's
		// waiters look again now and once the keys have surely expired.
		key := l.m.key
		w.poke(key)
		time.AfterFunc(2*l.m.cfg.driftAllowance()+l.m.cfg.roundTimeout(), func() { w.poke(key) })
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

// Extend renews the TTL on the nodes that still hold the lease's value (it
// never re-creates a key); on success ValidUntil becomes the call's start +
// TTL - drift. It returns an error wrapping ErrLost, and ends the lease,
// when too few nodes still hold it; other failures (a *QuorumError) leave
// the lease valid until its current ValidUntil; ErrReleased after Release.
func (l *Lease) Extend(ctx context.Context) (err error) {
	if err := l.Err(); err != nil {
		return err
	}
	m := l.m
	leave, err := m.e.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	ctx, span := m.e.tel.start(ctx, "redfence.extend", m.keyAttrs...)
	defer func() { endSpan(span, err) }()
	start := m.e.now()
	r := m.e.run(ctx, anyOrder, m.need, m.cfg.roundTimeout(), withValue(m.extendTmpl, l.boxed), decodeOne, proof{})
	reached := r.Decide()
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()))
	}
	m.e.tel.nodeReplies(ctx, span, "extend", m.e.nodes, r.Replies())
	elapsed := m.e.now().Sub(start)
	if reached && m.cfg.validity(elapsed) > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil { // released or expired while we waited
			return l.err
		}
		if until := start.Add(m.cfg.ttl - m.cfg.driftAllowance()); until.After(l.validUntil) {
			l.validUntil = until
		}
		return nil
	}
	if m.lostOn(r) {
		return l.lose(ctx, fmt.Errorf("extend: %w", m.quorumError("extend", r)))
	}
	if reached {
		return fmt.Errorf("extend took %v, leaving no validity of the %v TTL; the lease stays valid until %v",
			elapsed, m.cfg.ttl, l.ValidUntil().Round(0))
	}
	return fmt.Errorf("%w; the lease stays valid until its current deadline", m.quorumError("extend", r))
}

// Release deletes the lease's value on every node that still holds it
// (compare-and-delete: a newer holder is never touched) and ends the lease;
// with waiters queued, each node hands the key to the first. It returns
// once a majority deleted it, the other nodes' deletes still on their way
// (Close waits for them): nil when the lease was valid, an error wrapping ErrLost if
// the lease had ended, a *QuorumError if nodes could not answer (their
// copies expire), and ErrReleased on a second call. It runs on a context
// detached from ctx, so an ended ctx still releases; it returns within
// about twice the node timeout (docs/design.md, Release).
func (l *Lease) Release(ctx context.Context) (err error) {
	if l == nil {
		return ErrNilLease
	}
	leave, err := l.m.e.enter(ctx)
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
	if prior == nil && !time.Now().Before(l.validUntil) {
		l.end(ctx, fmt.Errorf("%w: validity ran out", ErrLost))
		prior = l.err
	}
	l.end(ctx, ErrReleased)
	l.mu.Unlock()

	m := l.m
	ctx, span := m.e.tel.start(detached(ctx), "redfence.release", m.keyAttrs...)
	defer func() { endSpan(span, err) }()
	if m.e.tel.metering {
		m.e.tel.holdDur.Record(ctx, time.Since(l.acquired).Seconds())
	}
	l.acquire.Settle()
	r := m.releaseAll(ctx, l.boxed, l.ticket) // hands the key to the first waiter queued on each node
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()),
			attribute.Int("redfence.nodes_pending", len(m.e.nodes)-len(r.Replies())))
	}
	m.e.tel.nodeReplies(ctx, span, "release", m.e.nodes, r.Replies())
	if m.e.tel.metering { // the nodes still on their way count their errors when they answer
		r.Rest(func(rest []quorum.Reply[int64]) {
			m.e.tel.nodeReplies(ctx, trace.SpanFromContext(context.Background()), "release", m.e.nodes, rest)
		})
	}
	switch {
	case prior != nil:
		return prior
	case r.OK() >= m.need:
		return nil
	case m.lostOn(r):
		return fmt.Errorf("%w: release: %w", ErrLost, m.quorumError("release", r))
	default:
		return m.quorumError("release", r)
	}
}

// Context returns a context derived from parent that is cancelled when the
// lease ends, with the reason as context.Cause (an error wrapping ErrLost,
// or ErrReleased); call the CancelFunc when done. It starts no goroutine. A
// nil parent is taken as context.Background().
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

// KeepAlive extends the lease about every TTL/3 and blocks until ctx or
// the lease ends. If extends keep failing, it declares the lease lost once
// its remaining validity falls to max(TTL/5, 2 x node timeout), so Done
// closes while that margin is left to stop. It returns an error wrapping
// ErrLost (and the last extend's error), ErrReleased, ctx.Err() (the lease
// stays held), or ErrClosed once the Client is closed.
func (l *Lease) KeepAlive(ctx context.Context) error {
	if l == nil {
		return ErrNilLease
	}
	if ctx == nil {
		return l.m.e.nilContext()
	}
	cfg, closed, done := l.m.cfg, l.m.e.life.closed, l.Done()
	// How long before ValidUntil to give up when extends keep failing: time
	// for the holder to stop before another can acquire.
	margin := max(cfg.ttl/5, 2*cfg.roundTimeout())
	wait := cfg.ttl / 3 // between successful extends
	for {
		// Never sleep past the point where the lease must be given up.
		wait = min(wait, time.Until(l.ValidUntil().Add(-margin)))
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-done:
				return l.Err()
			case <-closed:
				return ErrClosed
			case <-time.After(wait):
			}
		}
		err := l.Extend(ctx) // an ended lease's Err first
		switch {
		case err == nil:
			wait = cfg.ttl / 3
			continue
		case errors.Is(err, ErrLost), errors.Is(err, ErrReleased), errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		// A transient failure: retry soon, unless there is no time left.
		if !time.Now().Before(l.ValidUntil().Add(-margin)) {
			return l.lose(ctx, fmt.Errorf("could not extend before validity ran out: %w", err))
		}
		wait = max(cfg.roundTimeout(), cfg.ttl/20)
	}
}

// Do acquires the lock with Lock, runs fn while KeepAlive renews the
// lease, and releases it when fn returns or panics. fn's context is
// cancelled as soon as the lease is lost (with cause wrapping ErrLost),
// the Client is closed, or ctx ends. Do joins its goroutine before it
// returns an error wrapping what happened: ErrNotAcquired (fn never ran),
// fn's error, ErrLost, ErrClosed, or the release's. fn may release the
// lease itself.
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
		// On return and on a panic alike: join the keep-alive, then release.
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

// doResult is Do's error: a lost lease (the keep-alive's report first), then a
// closed Client, joined with fn's error; else fn's error, else the release's.
func doResult(fnErr, keepErr, relErr error) error {
	for _, target := range []error{ErrLost, ErrClosed} {
		for _, lost := range []error{keepErr, relErr} {
			switch {
			case !errors.Is(lost, target):
			case fnErr != nil:
				return errors.Join(lost, fnErr)
			default:
				return lost
			}
		}
	}
	if fnErr != nil {
		return fnErr
	}
	return relErr
}

// detached is context.WithoutCancel(ctx), or ctx if it cannot be cancelled.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}
