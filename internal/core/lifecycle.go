package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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
		return &ConfigError{m.e.pkg, "fn", "nil"}
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
