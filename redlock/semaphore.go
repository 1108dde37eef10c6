package redlock

import (
	"context"

	"github.com/redfence/redfence/internal/core"
)

// MaxPermits is the most permits NewSemaphore takes.
const MaxPermits = core.MaxPermits

// NewSemaphore returns a counting semaphore of permits holders at once on
// key, with opts overriding the Client's defaults. Each Acquire or
// TryAcquire returns a Lease for one permit, with a Mutex lease's lifecycle
// (Extend, KeepAlive, Context, Release, Done, Err), errors and validity
// (TTL - elapsed - drift): it expires on its own unless extended.
//
// Each node keeps the semaphore's holders in a sorted set at key (one member
// per lease, scored with its expiry on the node's clock) and admits a holder
// only while fewer than permits unexpired ones are recorded. Over N nodes a
// lease needs Quorum() = floor(N*permits/(permits+1)) + 1 nodes, more than a
// majority when permits > 1: with that quorum, permits+1 valid leases would
// need more admissions than the nodes can hold, so never more than permits
// leases are valid at once (docs/shapes.md, Semaphore, has the proof and its
// assumptions, those of the lock). The semaphore tolerates N - Quorum() nodes
// down or cut off, fewer than the lock: with 5 nodes and 2 permits, 1.
//
// It returns a *ConfigError for permits below 1 or above MaxPermits, an
// empty or reserved key (as NewMutex), and WithFencing: several holders at
// once share no order, and no per-permit token is defined. The key holds a
// sorted set: do not use it for a Mutex too (its commands would fail with
// WRONGTYPE). Acquire waits by polling under the retry policy; the wake-up
// of WithWakeup does not apply.
func (c *Client) NewSemaphore(key string, permits int, opts ...Option) (*Semaphore, error) {
	m, err := c.e.NewSemaphore(key, permits, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &Semaphore{m: Mutex{m: m}}, nil
}

// Semaphore is a named counting semaphore. It holds no ownership state: it
// is safe for concurrent use, and every successful Acquire or TryAcquire
// returns a new Lease for one permit.
type Semaphore struct{ m Mutex }

// Key returns the Redis key of the semaphore, prefix included.
func (s *Semaphore) Key() string { return s.m.Key() }

// Permits returns how many holders the semaphore admits at once.
func (s *Semaphore) Permits() int { return s.m.m.Permits() }

// Quorum returns how many nodes must admit a holder: floor(N*permits/
// (permits+1)) + 1 of the Client's N nodes.
func (s *Semaphore) Quorum() int { return s.m.m.Quorum() }

// Acquire takes a permit, retrying under the retry policy until it succeeds,
// the policy gives up, or ctx ends; errors are as for Mutex.Lock (ErrTaken
// from a node means all its permits are held).
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) { return s.m.Lock(ctx) }

// TryAcquire makes exactly one attempt to take a permit, as Mutex.TryLock:
// when it fails it leaves its holder on no node that answered.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) { return s.m.TryLock(ctx) }

// Do takes a permit with Acquire, runs fn while the lease is kept alive and
// releases it when fn returns, as Mutex.Do.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, l *Lease) error) error {
	return s.m.Do(ctx, fn)
}
