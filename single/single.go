package single

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
)

// Client runs locks on one Redis deployment.
type Client struct{ e *core.Engine }

// New returns a Client over one Redis deployment: a standalone server, a
// Sentinel-managed primary, or a Cluster (keys are placed by slot). opts set
// defaults for every Mutex. It returns a *ConfigError when client is nil, an
// option is invalid, or Redis refuses scripts (an ACL user without EVALSHA
// and EVAL: extend and release are scripts, so a lock could be taken but
// never released); New asks with a small script, waiting at most
// max(node timeout, 1s). If Redis does not answer in time, New still
// succeeds.
//
// A failover to an asynchronous replica can lose a lock key, letting a second
// client in: use fencing tokens where that matters. Give the client
// ContextTimeoutEnabled so that a request abandoned at the per-node timeout
// ends there too, and MaxRetries -1 and DialerRetries 1, so that Redis's own
// error is not lost in go-redis's retries (see the README, Lock clients).
func New(client redis.UniversalClient, opts ...Option) (*Client, error) {
	e, err := core.NewEngine("single", []redis.UniversalClient{client}, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// Close shuts the Client down. Calls that begin after Close fail with an error
// wrapping ErrClosed (CheckNodes gives it as every node's Err; a Release fails
// too: a lease not released by then stays on Redis until its TTL runs out). A
// Lock waiting when Close begins returns an error wrapping ErrNotAcquired and
// ErrClosed; KeepAlive returns ErrClosed, and Do cancels fn's context with that
// cause. Close waits for the other calls in flight (a TryLock, an Extend, a
// Release, Vouch, CheckNodes) to finish, ends the Client's subscriptions to
// release notices (see WithWakeup), joining the goroutines that read them, and
// waits until every request to Redis that this Client started has ended (each
// is bounded by the per-node timeout, or by the Redis client's own timeout if
// it ignores contexts). It does not close the Redis clients. It is safe to call
// concurrently with any other method, and more than once. Call it after
// releasing the Client's leases, for example before a goroutine leak check.
func (c *Client) Close() error {
	c.e.Close()
	return nil
}

// CheckNodes reports, for each node, what in its configuration is still a
// risk: appendonly off or appendfsync other than always while the restart
// quarantine is off (lost lock keys), an eviction policy (lock keys, and fence
// hashes just written), a replica role, asynchronous replicas (a failover can
// lose a lock key), a clock more than 500ms off this process's (fencing
// assumes clocks within 1s of true time). See docs/fencing.md, Assumptions.
// A node whose user may not run scripts has Err set, as does one that could
// not be checked. Each node is asked in parallel, bounded by the per-node
// timeout (at least 100ms).
func (c *Client) CheckNodes(ctx context.Context) []NodeCheck {
	leave, err := c.e.Enter(ctx)
	if err != nil {
		return c.e.FailedChecks(err)
	}
	defer leave()
	return c.e.CheckNodes(ctx)
}

// Vouch declares the Redis deployment trustworthy for its current run, so
// that the restart quarantine (off by default in this package; see
// WithQuarantine) does not hold it back. Vouching lasts until Redis restarts.
// It refuses (a *QuorumError wrapping ErrNotNew) when the node holds any key
// besides its quarantine marker, or was vouched for in an earlier run, unless
// it is already vouched for in its current run (then it changes nothing).
func (c *Client) Vouch(ctx context.Context) error {
	leave, err := c.e.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	return c.e.Vouch(ctx)
}

// NewMutex returns a Mutex for key, with opts overriding the Client's
// defaults. It returns a *ConfigError for an empty key, an invalid option,
// or a full key (prefix included) that names what redfence uses itself: the
// quarantine marker redfence:node, a name under the release notices'
// prefix redfence:released:, or the fence hash of a lock key ("{x}:fence",
// "{tag}x:fence").
func (c *Client) NewMutex(key string, opts ...Option) (*Mutex, error) {
	m, err := c.e.NewMutex(key, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &Mutex{m: m}, nil
}

// Mutex is a named lock. It holds no ownership state: it is safe for
// concurrent use, and every successful Lock or TryLock returns a new Lease.
type Mutex struct{ m *core.Mutex }

// Key returns the Redis key of the lock: the key prefix followed by the key.
func (m *Mutex) Key() string { return m.m.Key() }

// Lock acquires the lock, retrying under the retry policy (see WithRetry)
// until it succeeds, the policy gives up, or ctx ends. A failure wraps
// ErrNotAcquired, the last attempt's *QuorumError where Redis was asked, and
// ctx.Err() when the context ended.
//
// Lock and TryLock return soon after ctx ends: a failed attempt whose
// request timed out does not wait for its delete (it goes out all the same,
// and the value expires with the TTL otherwise).
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return wrap(m.m.Lock(ctx))
}

// TryLock makes exactly one attempt to acquire the lock. Errors are as for
// Lock. Whatever the outcome, it leaves none of its value behind on any node
// that answered when it fails.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return wrap(m.m.TryLock(ctx))
}

// Do acquires the lock with Lock, runs fn while the lease is kept alive (see
// Lease.KeepAlive), and releases the lease when fn returns, also when ctx was
// cancelled or fn panicked. fn's context is cancelled the moment the lease is
// lost, before its validity ends, with context.Cause wrapping ErrLost. Do
// joins the goroutine it starts before returning. Its error wraps what
// happened: ErrNotAcquired (fn did not run), fn's error, ErrLost if the lease
// was lost while fn ran (both, when both happened), ErrClosed if the Client
// was closed while fn ran, or the release's error. fn may release the lease
// early with l.Release, with its own context or any other; Do then does not
// release it again. A nil fn returns a *ConfigError.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context, l *Lease) error) error {
	var f func(context.Context, *core.Lease) error
	if fn != nil {
		f = func(ctx context.Context, l *core.Lease) error { return fn(ctx, &Lease{l: l}) }
	}
	return m.m.Do(ctx, f)
}

func wrap(l *core.Lease, err error) (*Lease, error) {
	if err != nil {
		return nil, err
	}
	return &Lease{l: l}, nil
}

// Lease is one acquisition of a Mutex. Its methods are safe for concurrent
// use. On the nil *Lease that a failed Lock or TryLock returns they do not
// panic: they answer as for a lease that ended, with ErrNilLease from Err,
// Extend, Release and KeepAlive, a closed Done, and zero values.
//
// Every method that takes a context returns a *ConfigError for a nil one,
// except Context, which takes nil as context.Background().
type Lease struct{ l *core.Lease }

// core returns the lease of the engine, nil for the nil Lease, whose methods
// answer as for a lease that ended, with ErrNilLease.
func (l *Lease) core() *core.Lease {
	if l == nil {
		return nil
	}
	return l.l
}

// Key returns the Redis key of the lock.
func (l *Lease) Key() string { return l.core().Key() }

// Value returns the random owner value stored in Redis.
func (l *Lease) Value() string { return l.core().Value() }

// Token returns the lease's fencing token, or 0 when fencing is off.
func (l *Lease) Token() fencing.Token { return fencing.Token(l.core().Token()) }

// ValidUntil returns when the lease's validity ends. The time keeps its
// monotonic clock reading, so comparisons with time.Now are immune to
// wall-clock jumps; Round(0), UTC or serialising it drop that reading.
func (l *Lease) ValidUntil() time.Time { return l.core().ValidUntil() }

// Extend sets a fresh TTL on the key if it still holds the lease's value (it
// never re-creates a missing key). On success ValidUntil moves to start of the
// call + TTL - drift allowance. If the key no longer holds the value, it
// returns an error wrapping ErrLost and ends the lease; other failures (a
// timeout, a connection error) return a *QuorumError and leave the lease valid
// until its current ValidUntil. After Release it returns ErrReleased.
func (l *Lease) Extend(ctx context.Context) error { return l.core().Extend(ctx) }

// Release deletes the key if it still holds the lease's value
// (compare-and-delete: a newer holder's key is never touched) and ends the
// lease. It returns nil if it deleted it while the lease was valid, an error
// wrapping ErrLost if the lease had expired or been lost before, a
// *QuorumError if Redis could not answer (the key expires with the TTL), and
// ErrReleased if called again.
//
// Release does not stop at ctx's cancellation or deadline: it sends the
// deletes on a context detached from ctx (context.WithoutCancel; ctx's values,
// such as a trace, are kept), each request bounded by the per-node timeout.
// So a ctx that has ended (an HTTP request's context after the client went
// away, the context of l.Context or the one Do gives fn, which the release
// itself cancels) still releases. It first waits, at most the per-node
// timeout too, for requests of the acquire still in flight, so that no
// delete is overtaken by the acquire's own late write: it returns within
// about twice the per-node timeout whatever ctx. A failed Release cannot be
// retried (it returns ErrReleased); the copies it could not delete expire
// with the TTL.
func (l *Lease) Release(ctx context.Context) error { return l.core().Release(ctx) }

// Done returns a channel closed, once, when the lease ends: on Release, on an
// Extend that finds the lease lost, or when its validity runs out.
func (l *Lease) Done() <-chan struct{} { return l.core().Done() }

// KeepAlive extends the lease about every TTL/3 and blocks until ctx ends or
// the lease ends. A failed extend is retried while validity remains; when the
// lease cannot be extended before its remaining validity falls below
// max(TTL/5, 2 x node timeout), KeepAlive declares it lost, so Done closes
// before ValidUntil and the holder has that margin to stop. It returns an
// error wrapping ErrLost when the lease is lost, ErrReleased when it was
// released, ctx.Err() when ctx ends (the lease stays held until its
// validity runs out or it is released), and ErrClosed as soon as the Client
// is closed. When it declares the lease lost, Err and context.Cause wrap the
// last extend's error too (errors.As finds its *QuorumError). Run it in its
// own goroutine, or use Mutex.Do, which does.
func (l *Lease) KeepAlive(ctx context.Context) error { return l.core().KeepAlive(ctx) }

// Context returns a context derived from parent that is cancelled when the
// lease ends, with the reason as context.Cause: an error wrapping ErrLost, or
// ErrReleased. Call the CancelFunc when done with it. It starts no goroutine.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.core().Context(parent)
}

// Err returns why Done was closed: ErrReleased, or an error wrapping ErrLost.
// It returns nil while the lease is held.
func (l *Lease) Err() error { return l.core().Err() }
