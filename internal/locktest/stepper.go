package locktest

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/redfence/redfence/redlock"
)

// Stepper is a retry policy that hands every retry of a waiting call
// (Lock, RLock, Acquire) to the test: after each failed attempt
// NextBackOff sends on Failed and waits for the go-ahead on Next (when ctx
// ends it stops the call instead).
type Stepper struct {
	ctx          context.Context
	Failed, Next chan struct{}
}

// NewStepper returns a Stepper that gives up when ctx ends.
func NewStepper(ctx context.Context) *Stepper {
	return &Stepper{ctx: ctx, Failed: make(chan struct{}), Next: make(chan struct{})}
}

// NextBackOff implements backoff.BackOff.
func (s *Stepper) NextBackOff() time.Duration {
	select {
	case s.Failed <- struct{}{}:
	case <-s.ctx.Done():
		return backoff.Stop
	}
	select {
	case <-s.Next:
		return 0
	case <-s.ctx.Done():
		return backoff.Stop
	}
}

// Reset implements backoff.BackOff.
func (s *Stepper) Reset() {}

// Option is the lock option that makes s the retry policy.
func (s *Stepper) Option() redlock.Option {
	return redlock.WithRetry(func() backoff.BackOff { return s })
}
