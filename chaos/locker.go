package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/nilcheck"
)

// Lease is one acquisition of a lock, as the workload needs it.
// *redlock.Lease satisfies it. If a Lease also has a
// Done() <-chan struct{} method, the workload stops holding it when Done is
// closed.
type Lease interface {
	// Token is the lease's fencing token (0 when the lock has none; the
	// fenced resource then rejects every write as invalid).
	Token() fencing.Token
	// ValidUntil is when the lease's validity ends; it should carry a
	// monotonic clock reading (time.Now().Add(d) does).
	ValidUntil() time.Time
	// Release gives the lease back.
	Release(ctx context.Context) error
}

// Locker is a lock under test: Acquire makes one attempt to take it, bounded
// by ctx, and returns a lease or an error.
type Locker interface {
	Acquire(ctx context.Context) (Lease, error)
}

// LockerFunc adapts a function to Locker.
type LockerFunc func(ctx context.Context) (Lease, error)

// Acquire calls f. A nil f returns an error wrapping ErrInvalidWorkload.
func (f LockerFunc) Acquire(ctx context.Context) (Lease, error) {
	if f == nil {
		return nil, invalidWorkload("nil LockerFunc")
	}
	return f(ctx)
}

// ErrNoLease is returned by a Locker from Adapt when the lock returned
// neither a lease nor an error.
var ErrNoLease = errors.New("chaos: lock returned no lease and no error")

// Adapt makes a Locker of any lock with a TryLock method that returns a
// Lease, such as *redlock.Mutex: chaos.Adapt(m). Each
// Acquire is one TryLock. A nil m gives a Locker whose Acquire returns an
// error wrapping ErrInvalidWorkload.
func Adapt[L Lease](m interface {
	TryLock(ctx context.Context) (L, error)
}) Locker {
	if nilcheck.IsNil(m) {
		return LockerFunc(func(context.Context) (Lease, error) {
			return nil, invalidWorkload("Adapt of a nil lock")
		})
	}
	return LockerFunc(func(ctx context.Context) (Lease, error) {
		l, err := m.TryLock(ctx)
		if err != nil {
			return nil, err
		}
		if nilcheck.IsNil(l) {
			return nil, ErrNoLease
		}
		return l, nil
	})
}
