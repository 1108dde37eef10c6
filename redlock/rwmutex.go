package redlock

import (
	"context"
)

// NewRWMutex returns a read-write lock on key, with opts overriding the
// Client's defaults: readers share it, a writer holds it alone. RLock and
// TryRLock return a read lease, Lock and TryLock a write lease, each a Lease
// with a Mutex lease's lifecycle (Extend, KeepAlive, Context, Release, Done,
// Err), errors and validity (TTL - elapsed - drift), over the Client's
// majority: any majority of readers' nodes meets any majority of a writer's
// on a node whose script refused one of them.
//
// On each node the lock key holds a writer's value, as a plain Mutex's does,
// or "redfence:readers" while readers hold; each reader is recorded with its
// own expiry beside it (a sorted set at ReadersKey), so a reader that
// crashes holds writers out only until its own TTL runs out. A plain Mutex
// on the same key excludes readers and writers, and is excluded by them.
//
// Writers are preferred over new readers: an attempt of a waiting Lock that
// finds readers leaves an intent marker on the node for one TTL, and while
// it is there the node admits no new reader (readers already in keep their
// leases and may extend them). A Lock polls at least every TTL/4 while it
// waits, renewing the marker; a granted writer deletes it, and a Lock that
// gives up withdraws it. TryLock leaves none. With one writer waiting, once
// its attempt has found readers on a majority, no new reader gets in: the
// writer acquires as soon as the readers in at that moment have released or
// expired. Readers are not protected from a stream of writers beyond
// competing with them for each gap (docs/shapes.md, Read-write lock).
//
// With WithFencing, write leases carry fencing tokens, from the key's fence
// hash, shared with plain Mutexes on the key (docs/fencing.md's guarantee
// holds among them); read leases never do (Token is 0): readers hold
// together, in no order a token could express, and do not write.
//
// It returns a *ConfigError as NewMutex does (an empty or reserved key, an
// invalid option), and for a key whose readers' set and intent marker a
// Cluster client would send to another slot (a key with "}" but no hash
// tag). RLock and Lock wait by polling under the retry policy: the wake-up
// of WithWakeup does not apply.
func (c *Client) NewRWMutex(key string, opts ...Option) (*RWMutex, error) {
	rw, err := c.e.NewRWMutex(key, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &RWMutex{r: Mutex{m: rw.Reader()}, w: Mutex{m: rw.Writer()}, wq: Mutex{m: rw.WaitingWriter()}}, nil
}

// RWMutex is a named read-write lock. It holds no ownership state: it is
// safe for concurrent use, and every successful acquire returns a new Lease.
type RWMutex struct {
	r  Mutex // reads
	w  Mutex // TryLock
	wq Mutex // Lock and Do: a waiting writer
}

// Key returns the Redis key of the lock, prefix included.
func (rw *RWMutex) Key() string { return rw.w.Key() }

// RLock takes a read lease, retrying under the retry policy until it
// succeeds, the policy gives up, or ctx ends; errors are as for Mutex.Lock
// (ErrTaken from a node means a writer holds the key there, or waits for it).
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) { return rw.r.Lock(ctx) }

// TryRLock makes exactly one attempt to take a read lease, as Mutex.TryLock.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) { return rw.r.TryLock(ctx) }

// Lock takes the write lease, retrying until it succeeds, the policy gives
// up, or ctx ends, as Mutex.Lock, at least every TTL/4; its attempts that
// find readers hold new readers back (see NewRWMutex).
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) { return rw.wq.Lock(ctx) }

// TryLock makes exactly one attempt to take the write lease, as
// Mutex.TryLock; it does not hold readers back.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) { return rw.w.TryLock(ctx) }

// RDo takes a read lease with RLock, runs fn while the lease is kept alive
// and releases it when fn returns, as Mutex.Do.
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context, l *Lease) error) error {
	return rw.r.Do(ctx, fn)
}

// Do takes the write lease with Lock, runs fn while the lease is kept alive
// and releases it when fn returns, as Mutex.Do.
func (rw *RWMutex) Do(ctx context.Context, fn func(ctx context.Context, l *Lease) error) error {
	return rw.wq.Do(ctx, fn)
}
