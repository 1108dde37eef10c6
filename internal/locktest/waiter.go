package locktest

import (
	"context"
	"errors"

	"github.com/redfence/redfence/redlock"
)

// waiter runs a waiting call (Lock, RLock, Acquire) in a goroutine, one
// attempt at a time: its retry policy (retry) hands each retry to the test.
type waiter struct {
	step   *Stepper
	ctx    context.Context
	cancel context.CancelFunc
	got    chan result
	ended  bool
}

func newWaiter(ctx context.Context) *waiter {
	wctx, cancel := context.WithCancel(ctx)
	return &waiter{step: NewStepper(wctx), ctx: wctx, cancel: cancel, got: make(chan result, 1)}
}

func (w *waiter) retry() redlock.Option {
	return w.step.Option()
}

func (w *waiter) start(call func(context.Context) (*redlock.Lease, error)) {
	go func() {
		l, err := call(w.ctx)
		w.got <- result{l, err}
	}()
}

// refused waits until the call's first attempt was refused, and returns
// nil; if the call returned first, it returns its error.
func (w *waiter) refused() error {
	select {
	case <-w.step.Failed:
		return nil
	case r := <-w.got:
		w.ended = true
		if r.err != nil {
			return r.err
		}
		_ = r.l.Release(context.WithoutCancel(w.ctx))
		return errors.New("acquired at once while another held")
	}
}

// next lets the call make its next attempt and returns its outcome.
func (w *waiter) next() (*redlock.Lease, error) {
	w.step.Next <- struct{}{}
	select {
	case r := <-w.got:
		w.ended = true
		return r.l, r.err
	case <-w.step.Failed:
		return nil, errors.New("the next attempt was refused too")
	}
}

// stop ends the call if it is still running, and waits for it.
func (w *waiter) stop() {
	w.cancel()
	if !w.ended {
		<-w.got
		w.ended = true
	}
}
