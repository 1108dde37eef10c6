package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// lifecycle is a Client's open or closed state and its calls in flight:
// Close waits for those that began before it and refuses the others.
type lifecycle struct {
	mu      sync.Mutex // guards the fields below; never held across I/O
	closing bool
	ops     int           // calls in flight (enter without leave)
	idle    chan struct{} // made by Close while ops > 0; closed when ops reaches 0
	closed  chan struct{} // closed when Close begins
	// acquiring cancels the waiting Lock calls, which Close interrupts.
	acquiring map[*int]context.CancelCauseFunc
}

var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (e *Client) nilContext() error {
	return &ConfigError{Pkg: e.pkg, Field: "context", Msg: "nil (pass context.Background() or a context derived from it)"}
}

// enter registers a call that talks to the nodes; the caller calls leave
// when it ends. It returns ErrClosed once Close began, or a nil ctx's error.
func (e *Client) enter(ctx context.Context) (leave func(), err error) {
	if ctx == nil {
		return nil, e.nilContext()
	}
	lc := &e.life
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closing {
		return nil, ErrClosed
	}
	lc.ops++
	return e.leaveFn, nil
}

func (e *Client) leave() {
	lc := &e.life
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.ops--
	if lc.ops == 0 && lc.idle != nil {
		close(lc.idle)
		lc.idle = nil
	}
}

// enterAcquire is enter whose ErrClosed wraps ErrNotAcquired too.
func (e *Client) enterAcquire(ctx context.Context) (leave func(), err error) {
	leave, err = e.enter(ctx)
	if errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	return leave, err
}

// interruptible returns ctx, cancelled by Close, for a waiting Lock, and
// done, to call with Lock's error: it returns that error, or ErrNotAcquired
// and ErrClosed if Close interrupted the call.
func (e *Client) interruptible(ctx context.Context) (context.Context, func(error) error) {
	cctx, cancel := context.WithCancelCause(ctx)
	id := new(int)
	lc := &e.life
	lc.mu.Lock()
	if lc.closing {
		cancel(ErrClosed) // Close began after enter: its cancels have run
	} else {
		if lc.acquiring == nil {
			lc.acquiring = map[*int]context.CancelCauseFunc{}
		}
		lc.acquiring[id] = cancel
	}
	lc.mu.Unlock()
	return cctx, func(err error) error {
		lc.mu.Lock()
		delete(lc.acquiring, id)
		lc.mu.Unlock()
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrNotAcquired, ErrClosed)
		}
		cancel(context.Canceled)
		return err
	}
}

// shut refuses new calls, interrupts waiting Locks, waits for the others.
func (e *Client) shut() {
	lc := &e.life
	lc.mu.Lock()
	if !lc.closing {
		lc.closing = true
		close(lc.closed)
		for _, cancel := range lc.acquiring {
			cancel(ErrClosed)
		}
	}
	var idle chan struct{}
	if lc.ops > 0 {
		if lc.idle == nil {
			lc.idle = make(chan struct{})
		}
		idle = lc.idle
	}
	lc.mu.Unlock()
	if idle != nil {
		<-idle
	}
}
