package redlock

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a Client (New: the defaults of every Mutex) or one
// Mutex (NewMutex and the other constructors). docs/design.md, Options and
// defaults, says what each one guards against.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTTL sets how long a lock key lives on each node, and so the longest a
// lease lasts without Extend. At least 10ms, and at most the restart
// quarantine when it is on. The default is 8s.
func WithTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.ttl = d }) }

// WithNodeTimeout bounds each request to one node: one that has not
// answered by then counts as failed. At least 1ms and below TTL/2. The
// default is TTL/10, at least 5ms (TTL/3 under a 15ms TTL), at most 100ms.
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.nodeTimeout, c.timeoutSet = d, true })
}

// WithDriftFactor sets the allowance for clock drift between the client
// and the nodes as a fraction of the TTL, plus 2ms for Redis's millisecond
// expiry: validity is TTL - elapsed - drift. In (0, 0.1); the default is
// 0.01.
func WithDriftFactor(f float64) Option { return optionFunc(func(c *config) { c.drift = f }) }

// WithRetry sets Lock's retry policy, as a factory called once per Lock
// (a BackOff keeps state); backoff.StopBackOff{} makes one attempt. The
// default waits 20ms, growing by 1.6x up to 500ms, each delay randomised
// by +-50%, with no limit: Lock stops when it acquires or ctx ends.
func WithRetry(f func() backoff.BackOff) Option { return optionFunc(func(c *config) { c.retry = f }) }

// WithKeyPrefix sets a prefix: the Redis key is exactly prefix+key. The
// default is none.
func WithKeyPrefix(p string) Option { return optionFunc(func(c *config) { c.keyPrefix = p }) }

// WithFencing gives every lease a fencing token (Lease.Token), greater
// than every earlier lease's of the key, also across nodes that lost
// writes (docs/fencing.md has the guarantee and its assumptions). It keeps
// a fence hash per key, and over several nodes costs a second round. The
// default is off: Token returns 0.
func WithFencing() Option { return optionFunc(func(c *config) { c.fenced = true }) }

// WithFenceRetention sets how long a key's fence hash lives after its
// last write; losing it is safe (tokens start from the node's clock). At
// least 10s and twice the TTL; the default is 1 hour, or twice the TTL if
// longer.
func WithFenceRetention(d time.Duration) Option {
	return optionFunc(func(c *config) { c.fenceRetention, c.retentionSet = d, true })
}

// WithQuarantine sets the restart quarantine: a node that restarted less
// than d ago, or was flushed, refuses to vote for d by its own clock
// (ErrQuarantined), so that a lock it forgot is not granted twice. d must
// be at least every TTL; 0 turns it off; not with Redis Cluster clients.
// New nodes start quarantined: see Client.Vouch. The default is 60s over
// several nodes, off over one (docs/design.md, Restart quarantine).
func WithQuarantine(d time.Duration) Option { return optionFunc(func(c *config) { c.quarantine = d }) }

// WithWakeup turns the queue of waiters on or off. On, a Lock that finds
// the key taken queues on the nodes, and a release hands the key to the
// first waiter of any Client and tells it (pub/sub); off, Lock polls under
// its retry policy. For New only. The default is on (docs/design.md,
// Waiting).
func WithWakeup(on bool) Option { return optionFunc(func(c *config) { c.noWakeup = !on }) }

// WithLogger sets the logger: warnings for lost leases and risky nodes,
// debug lines for retries and fencing rounds. For New only. The default is
// silent.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// WithTelemetry sets where spans (tp) and metrics (mp) go; see
// docs/design.md, Telemetry. For New only. The defaults, and what a nil tp
// or mp stands for, are otel.GetTracerProvider() and otel.GetMeterProvider()
// when New runs; while those are the unset globals or no-ops, no telemetry
// calls are made.
func WithTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.tracerProvider, c.meterProvider = tp, mp })
}

// WithReplicaAcks makes every acquire and extend wait (WAIT, in the same
// pipeline) until n replicas acknowledged it, for at most timeout; an
// acquire they do not acknowledge is undone and fails with ErrReplicaAcks.
// For New over one node (not a Ring), not per Mutex; n in [0, 100],
// timeout at least 1ms, node timeout + timeout below TTL/2. The default is
// off (docs/topologies.md, Replica acknowledgement).
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return optionFunc(func(c *config) { c.replicaAcks, c.ackTimeout = n, timeout })
}
