package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/nilcheck"
)

// Client runs locks over a fixed set of independent Redis primaries (New:
// Redlock) or over one Redis deployment (NewSingle, which package single's
// New calls: the single-instance lock, where every quorum is 1).
type Client struct{ e *core.Engine }

func init() {
	core.EngineOf = func(c any) *core.Engine {
		if cl, ok := c.(*Client); ok {
			return cl.e
		}
		return nil
	}
	core.OptionOf = func(f func(*core.Config)) any { return optionFunc(f) }
}

// New returns a Client over clients, one per independent Redis primary (not
// replicas of one another: a failover loses keys). Give an odd number of at
// least 3 nodes; 5 tolerates two failures. opts set defaults for every Mutex.
//
// It returns a *ConfigError when clients is empty, holds a nil client, holds
// the same client or address twice, or an option is invalid. It then asks
// every node, in parallel, for its run id with a small script, waiting at
// most max(node timeout, 1s), and returns a *ConfigError when two clients
// reach the same server under different addresses (127.0.0.1:6379 and
// localhost:6379: one server would vote twice) or a node refuses scripts
// (an ACL user without EVALSHA and EVAL: extend and release are scripts). A
// node that does not answer in time, or answers with another error, is not
// checked, and New still succeeds: a minority may be down at start.
// CheckNodes reports a repeated run id later. The Cluster clients and Rings
// among clients are checked for scripts only, not for their identity.
//
// The restart quarantine is on by default (see WithQuarantine): on a set of
// brand-new nodes, call Vouch once, or wait one quarantine period, before
// locks can be taken.
//
// Each client's own timeouts and retries still apply: give them
// ContextTimeoutEnabled so that requests abandoned at the per-node timeout
// end there too (otherwise they run on, in the background, until the
// client's read timeout), and MaxRetries -1 and DialerRetries 1, since
// go-redis's retries run within the per-node timeout and a node's own error
// (a refused connection, a read-only replica) then ends as a timeout (see
// the README, Lock clients).
func New(clients []redis.UniversalClient, opts ...Option) (*Client, error) {
	return NewFromConns(conns(clients), opts...)
}

// NewSingle returns a Client over one Redis deployment: a standalone server,
// a Sentinel-managed primary (redis.NewFailoverClient), or a Cluster (keys
// are placed by slot). It is package single's New; see there. The restart
// quarantine is off by default, and WithReplicaAcks is accepted. It returns
// a *ConfigError when client is nil, an option is invalid, or Redis refuses
// scripts; New's other checks apply to its one node.
func NewSingle(client redis.UniversalClient, opts ...Option) (*Client, error) {
	return NewSingleFromConn(conns([]redis.UniversalClient{client})[0], opts...)
}

// NewFromConns is New over the engine's connections rather than go-redis
// clients. It is the entry of the adapters of other Redis clients in this
// repository (module github.com/redfence/redfence/rueidislock, whose New
// calls it); applications call New or an adapter's New.
func NewFromConns(conns []core.Conn, opts ...Option) (*Client, error) {
	cfg := buildConfig(opts)
	if !cfg.QuarantineSet() {
		cfg.SetQuarantine(core.DefaultQuarantine)
	}
	e, err := core.NewEngineConns("redlock", conns, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// NewSingleFromConn is NewSingle over one of the engine's connections, for
// the adapters of other Redis clients (see NewFromConns).
func NewSingleFromConn(conn core.Conn, opts ...Option) (*Client, error) {
	e, err := core.NewEngineConns("single", []core.Conn{conn}, buildConfig(opts))
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// conns returns the connections of go-redis clients; a nil client stays
// nil, for New's error.
func conns(clients []redis.UniversalClient) []core.Conn {
	out := make([]core.Conn, len(clients))
	for i, c := range clients {
		if !nilcheck.IsNil(c) {
			out[i] = core.GoRedis(c)
		}
	}
	return out
}

// Quorum returns how many nodes must agree: N/2+1 (1 for NewSingle).
func (c *Client) Quorum() int { return c.e.Quorum() }

// Clients returns the Redis clients the Client was made with, one per node,
// in order (a new slice each call), for code that runs its own commands on
// the lock's nodes, such as package coord. A node reached through another
// client's adapter (NewFromConns) has a nil entry.
func (c *Client) Clients() []redis.UniversalClient {
	nodes := c.e.Nodes()
	out := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		out[i] = n.Client
	}
	return out
}

// Close shuts the Client down. Calls that begin after Close fail with an error
// wrapping ErrClosed (CheckNodes gives it as every node's Err; a Release fails
// too: a lease not released by then stays on the nodes until its TTL runs out).
// A Lock waiting when Close begins returns an error wrapping ErrNotAcquired and
// ErrClosed; KeepAlive returns ErrClosed, and Do cancels fn's context with that
// cause. Close waits for the other calls in flight (a TryLock, an Extend, a
// Release, Vouch, CheckNodes, Inspect) to finish, ends the Client's subscriptions to
// release notices (see WithWakeup), joining the goroutines that read them, and
// waits until every request to a node that this Client started has ended (each
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
// assumes clocks within 1s of true time), and a node with the same run id
// as another (one server under two addresses). See docs/fencing.md,
// Assumptions. A node whose user may not run scripts has Err set, as does
// one that could not be checked. Each node is asked in parallel, bounded by
// the per-node timeout (at least 100ms).
func (c *Client) CheckNodes(ctx context.Context) []NodeCheck {
	leave, err := c.e.Enter(ctx)
	if err != nil {
		return c.e.FailedChecks(err)
	}
	defer leave()
	return c.e.CheckNodes(ctx)
}

// Vouch declares every node trustworthy for its current run, so that the
// restart quarantine does not hold it back: the operator step for a brand-new
// set of nodes, which cannot have forgotten a lock because none was ever
// taken. Vouching lasts until the node restarts. Do not vouch for a node that
// restarted or was flushed while locks may have been held: that is exactly
// the case the quarantine protects against.
//
// Vouch refuses when it sees that the set is not brand-new: it first asks
// every node, and if a node could not be asked, holds any key besides its
// marker (in any database: lock keys, fence hashes, which outlive a lock by
// an hour or more, or other data), or was vouched for in an earlier run, it
// vouches for no node and returns a *QuorumError listing every node (ErrNotNew
// for those that showed use). A node flushed while a lock was held looks new;
// the nodes that kept the lock's key are the evidence. It cannot see a lock
// whose every key was lost. When every node is already vouched for in its
// current run, Vouch changes nothing and returns nil.
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

// Key returns the Redis key of the lock: the key prefix followed by the key
// (for a multi-key lock, the first key; Keys has every one).
func (m *Mutex) Key() string { return m.m.Key() }

// Lock acquires the lock, retrying under the retry policy (see WithRetry)
// until it succeeds, the policy gives up, or ctx ends. A failure wraps
// ErrNotAcquired, the last attempt's *QuorumError where nodes were asked, and
// ctx.Err() when the context ended. Nodes in restart quarantine refuse every
// attempt until it ends (up to the quarantine, 60s by default, counted from
// the first acquire that found them new or flushed): a Lock without a
// deadline waits that long, its error, if any, says so and names Vouch.
//
// Lock and TryLock return soon after ctx ends: a failed attempt waits for
// the nodes that answered it to delete its value, not for nodes that did not
// answer (their deletes go out all the same, and the value expires with the
// TTL otherwise). A node that answered the acquire and then hangs can delay
// the return by up to one node timeout after ctx ends.
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

// Key returns the Redis key of the lock (for a multi-key lock, the first
// key; Keys has every one).
func (l *Lease) Key() string { return l.core().Key() }

// Value returns the random owner value stored on the nodes.
func (l *Lease) Value() string { return l.core().Value() }

// Token returns the lease's fencing token, or 0 when fencing is off (for a
// multi-key lease, the first key's token; Tokens has every one).
func (l *Lease) Token() fencing.Token { return fencing.Token(l.core().Token()) }

// ValidUntil returns when the lease's validity ends. The time keeps its
// monotonic clock reading, so comparisons with time.Now are immune to
// wall-clock jumps; Round(0), UTC or serialising it drop that reading.
func (l *Lease) ValidUntil() time.Time { return l.core().ValidUntil() }

// Extend asks the nodes for a fresh TTL where they still hold the lease's
// value (it never re-creates a missing key). On success ValidUntil moves to
// start of the call + TTL - drift allowance. If too many nodes no longer hold
// the value, it returns an error wrapping ErrLost and ends the lease; other
// failures (timeouts, errors) return a *QuorumError and leave the lease valid
// until its current ValidUntil. After Release it returns ErrReleased.
func (l *Lease) Extend(ctx context.Context) error { return l.core().Extend(ctx) }

// Release deletes the lease's value on all nodes (compare-and-delete: a newer
// holder's key is never touched) and ends the lease. It returns nil if a
// majority deleted it while the lease was valid, an error wrapping ErrLost if
// the lease had expired or been lost before, a *QuorumError if nodes could not
// answer (their copies expire with the TTL), and ErrReleased if called again.
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
