package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/redfence/redfence/internal/quorum"
)

// Lease is one successful acquisition.
type Lease struct {
	m     *Mutex
	value string
	token uint64
	// acquired is when the acquire returned, for the hold-time metric.
	acquired time.Time
	// settle waits for the acquire's straggling requests (bounded by the node
	// timeout), so that Release cannot be overtaken by a late SET.
	settle func()

	mu         sync.Mutex // guards the fields below; never held across I/O
	validUntil time.Time
	timer      *time.Timer
	done       chan struct{}
	err        error // why done closed
	released   bool
	watchers   map[*int]context.CancelCauseFunc // Context()s to cancel when the lease ends
	// slot: the lease still counts as a holder in the engine's wait queue for
	// its key (wake-up on); end gives it up, or Release after its round.
	slot bool
}

func newLease(m *Mutex, value string, validUntil time.Time, settle func()) *Lease {
	l := &Lease{m: m, value: value, validUntil: validUntil, settle: settle, done: make(chan struct{}), acquired: time.Now()}
	if w := m.e.wake; w != nil {
		w.hold(m.key)
		l.slot = true
	}
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

// Value returns the random owner value stored on the nodes.
func (l *Lease) Value() string {
	if l == nil {
		return ""
	}
	return l.value
}

// Token returns the fencing token, 0 when fencing is off.
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
	if l.slot { // lost or expired: the next waiter need not wait for a Release
		l.slot = false
		l.m.e.wake.unhold(l.m.key) // the subscriptions run under the waker's own lifetime, not a caller's
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
	ctx, span := m.e.tel.tracer.Start(ctx, "redfence.extend", m.keyAttrs)
	defer func() { endSpan(span, err) }()
	start := m.e.now()
	r := m.script(ctx, extendScript, m.e.need, l.value, m.cfg.TTL.Milliseconds())
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
	if notHeld(r.Replies()) > n-m.e.need {
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
	slot := l.slot // given up below, once the keys are deleted
	l.slot = false
	prior := l.err // non-nil: lost or expired before Release
	expired := prior == nil && !time.Now().Before(l.validUntil)
	if expired {
		l.end(ctx, fmt.Errorf("%w: validity ran out", ErrLost))
		prior = l.err
	}
	l.end(ctx, ErrReleased)
	l.mu.Unlock()

	m := l.m
	ctx, span := m.e.tel.tracer.Start(context.WithoutCancel(ctx), "redfence.release", m.keyAttrs)
	defer func() { endSpan(span, err) }()
	m.e.tel.holdDur.Record(ctx, seconds(time.Since(l.acquired)))
	l.settle()
	var r *quorum.Round[int64]
	if w := m.e.wake; w != nil {
		r = m.releaseAnnounced(ctx, l.value, w.noticeID(), slot) // wakes the next waiter of this engine
	} else {
		r = m.releaseAll(ctx, l.value)
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redfence.votes_for", r.OK()))
	}
	m.e.tel.nodeReplies(ctx, span, "release", m.e.nodes, r.Replies())
	switch {
	case prior != nil:
		return prior
	case r.OK() >= m.e.need:
		return nil
	case notHeld(r.Replies()) > len(m.e.nodes)-m.e.need:
		return fmt.Errorf("%w: release: %w", ErrLost, m.quorumError("release", r))
	default:
		return m.quorumError("release", r)
	}
}
