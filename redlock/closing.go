package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// lifecycle is an Engine's open or closed state and the calls in flight:
// Close waits for the calls that began before it, and refuses the calls
// that begin after it. Its zero value is an open engine with nothing in
// flight.
type lifecycle struct {
	mu      sync.Mutex // guards the fields below; never held across I/O
	closing bool
	ops     int           // calls in flight (enter without leave)
	idle    chan struct{} // made by Close while ops > 0; closed when ops reaches 0
	closed  chan struct{} // closed when Close begins; made on first use
	// acquiring holds the cancel functions of the Lock calls in flight, which
	// Close interrupts (a waiting Lock could otherwise hold Close up for as
	// long as its caller's context allows).
	acquiring map[*int]context.CancelCauseFunc
}

// closedDone is the Done channel of the nil lease: always closed.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// nilContext is the error for a nil context argument.
func (e *Client) nilContext() error {
	return &ConfigError{Pkg: e.pkg, Field: "context", Msg: "nil (pass context.Background() or a context derived from it)"}
}

// enter registers a call that talks to the nodes: it returns ErrClosed once
// Close has begun, a *ConfigError for a nil ctx, and otherwise leave, which
// the caller must call when the call has ended (its node requests included,
// or left to the engine's trackers).
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

// interruptible returns a context derived from ctx that Close cancels with
// cause ErrClosed, for a Lock that waits (it has entered already), and
// done, which the caller calls with Lock's error when Lock returns; done
// returns that error, or one wrapping ErrNotAcquired and ErrClosed if Close
// interrupted the call.
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

// closedChan returns a channel closed when Close begins.
func (e *Client) closedChan() <-chan struct{} {
	lc := &e.life
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed == nil {
		lc.closed = make(chan struct{})
	}
	return lc.closed
}

// shut refuses new calls, interrupts the Lock calls in flight, and waits
// until no call is in flight.
func (e *Client) shut() {
	lc := &e.life
	lc.mu.Lock()
	if !lc.closing {
		lc.closing = true
		if lc.closed == nil {
			lc.closed = make(chan struct{})
		}
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

// failedChecks is CheckNodes' answer when it cannot run: err for every node.
func (e *Client) failedChecks(err error) []NodeCheck {
	out := make([]NodeCheck, len(e.nodes))
	for i, n := range e.nodes {
		out[i] = NodeCheck{Index: i, Addr: n.addr, Err: err}
	}
	return out
}
