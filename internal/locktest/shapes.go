package locktest

import (
	"context"

	"github.com/redfence/redfence/redlock"
)

// RW is the two sides of a read-write lock, as Client.NewRWMutex returns
// them, under the names the tests use.
type RW struct{ w, r *redlock.Mutex }

// NewRW returns c's read-write lock on key.
func NewRW(c *redlock.Client, key string, o ...redlock.Option) (*RW, error) {
	w, r, err := c.NewRWMutex(key, o...)
	if err != nil {
		return nil, err
	}
	return &RW{w: w, r: r}, nil
}

// Key is the lock key.
func (rw *RW) Key() string { return rw.w.Key() }

// RLock is the readers' Lock.
func (rw *RW) RLock(ctx context.Context) (*redlock.Lease, error) { return rw.r.Lock(ctx) }

// TryRLock is the readers' TryLock.
func (rw *RW) TryRLock(ctx context.Context) (*redlock.Lease, error) { return rw.r.TryLock(ctx) }

// Lock is the writer's Lock.
func (rw *RW) Lock(ctx context.Context) (*redlock.Lease, error) { return rw.w.Lock(ctx) }

// TryLock is the writer's TryLock.
func (rw *RW) TryLock(ctx context.Context) (*redlock.Lease, error) { return rw.w.TryLock(ctx) }

// RDo is the readers' Do.
func (rw *RW) RDo(ctx context.Context, fn func(context.Context, *redlock.Lease) error) error {
	return rw.r.Do(ctx, fn)
}

// Do is the writer's Do.
func (rw *RW) Do(ctx context.Context, fn func(context.Context, *redlock.Lease) error) error {
	return rw.w.Do(ctx, fn)
}

// Sem is a Mutex of Client.NewSemaphore under the names the tests use.
type Sem struct{ *redlock.Mutex }

// NewSem returns c's semaphore of permits on key.
func NewSem(c *redlock.Client, key string, permits int, o ...redlock.Option) (*Sem, error) {
	m, err := c.NewSemaphore(key, permits, o...)
	if err != nil {
		return nil, err
	}
	return &Sem{m}, nil
}

// Acquire is the Mutex's Lock.
func (s *Sem) Acquire(ctx context.Context) (*redlock.Lease, error) { return s.Lock(ctx) }

// TryAcquire is the Mutex's TryLock.
func (s *Sem) TryAcquire(ctx context.Context) (*redlock.Lease, error) { return s.TryLock(ctx) }

// semQuorum is how many of n nodes a semaphore of k permits needs
// (docs/shapes.md, Semaphore): floor(n*k/(k+1)) + 1.
func semQuorum(n, k int) int { return n*k/(k+1) + 1 }

// maxPermits and maxMultiKeys are the documented limits of NewSemaphore and
// NewMultiMutex.
const (
	maxPermits   = 1 << 16
	maxMultiKeys = 64
)
