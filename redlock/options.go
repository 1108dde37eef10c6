package redlock

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/core"
)

// Option configures a Client (defaults for its mutexes) or one Mutex
// (overrides). Options are applied in order; the last one wins.
type Option interface{ apply(*core.Config) }

type optionFunc func(*core.Config)

func (f optionFunc) apply(c *core.Config) { f(c) }

// WithTTL sets how long a lock key lives on each node before Redis expires
// it, and so the longest a lease lasts without Extend. It must be at least
// 10ms. The default is 8s.
func WithTTL(d time.Duration) Option { return optionFunc(func(c *core.Config) { c.SetTTL(d) }) }

// WithNodeTimeout bounds each request to one node: a node that has not
// answered by then counts as failed. Keep it small against the TTL (the
// Redlock paper suggests 5-50ms for a 10s TTL) so that a hung node costs
// little, but above a few round trips: a request that times out closes its
// connection, and the next one dials, handshakes and sends within the
// timeout. It must be at least 1ms and below TTL/2. The default is TTL/10,
// at least 5ms (TTL/3 for TTLs under 15ms) and at most 100ms.
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetNodeTimeout(d) })
}

// WithDriftFactor sets the allowance for clock drift between the client and
// the nodes, as a fraction of the TTL; 2ms are added to it for Redis's
// millisecond expiry precision. It must be in (0, 0.1). The default is 0.01.
func WithDriftFactor(f float64) Option { return optionFunc(func(c *core.Config) { c.SetDrift(f) }) }

// WithRetry sets the retry policy of Lock as a factory, called once per Lock
// (BackOff values keep state). Use backoff.StopBackOff{} for a single attempt.
// The default waits 20ms, growing by 1.6x up to 500ms, each delay randomised
// by +-50%, with no limit on attempts: Lock then stops only when acquired or
// when its context ends.
func WithRetry(f func() backoff.BackOff) Option {
	return optionFunc(func(c *core.Config) { c.SetRetry(f) })
}

// WithKeyPrefix sets a prefix for lock keys: the Redis key is exactly
// prefix+key. The default is no prefix.
func WithKeyPrefix(p string) Option { return optionFunc(func(c *core.Config) { c.SetKeyPrefix(p) }) }

func buildConfig(opts []Option) core.Config {
	var c core.Config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// WithFencing turns fencing tokens on: every successful Lock or TryLock
// returns a Lease whose Token is greater than zero, and tokens for the same
// key increase with every acquisition, also across a node that lost writes
// (a restart without persistence, a failover, a flush): a token is never
// below the node's clock in microseconds (see docs/fencing.md for the exact
// guarantee and its assumptions). It writes one fence hash per key, which
// expires WithFenceRetention after its last write. The default is off: Token
// returns 0 and no fence key is written.
func WithFencing() Option { return optionFunc(func(c *core.Config) { c.SetFencing(true) }) }

// WithFenceRetention sets how long a key's fence hash lives after its last
// write, which bounds the memory fencing uses by the keys locked within that
// time. An expired counter is safe to lose: the next token still starts from
// the node's clock, above every earlier one (docs/fencing.md). At least 10s
// and twice the TTL; the default is 1 hour, or twice the TTL if longer.
func WithFenceRetention(d time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetFenceRetention(d) })
}

// WithQuarantine sets the restart quarantine to d: a node that restarted
// less than d ago, or whose data was flushed, refuses to vote for d by its
// own clock (a NodeError wrapping ErrQuarantined), so that a lock it forgot
// cannot be granted twice. d must be at least every TTL used; 0 turns it
// off. New nodes start quarantined: see Client.Vouch. Not with Redis
// Cluster clients. The default is 60s for New and off for NewSingle
// (docs/design.md, Restart quarantine).
func WithQuarantine(d time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetQuarantine(d) })
}

// WithWakeup turns the wake-up of waiting Lock calls on or off. On, a
// Client's Lock calls for one key queue in arrival order, only the first
// asks Redis, and it retries at once when a lease of the Client ends or a
// release by another client is announced (pub/sub on
// "redfence:released:"+key; ACL rule in docs/topologies.md). The retry
// policy still bounds every wait. Only for New. The default is on
// (docs/design.md, Waiting).
func WithWakeup(on bool) Option {
	return optionFunc(func(c *core.Config) { c.NoWakeup = !on })
}

// WithLogger sets the logger: debug lines for retries and fencing rounds,
// warnings for lost leases and for nodes that can lose acknowledged writes
// (CheckNodes). Only for New. The default is silent.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *core.Config) { c.Logger = l })
}

// WithTracerProvider sets where spans go: redfence.acquire (with votes for
// and against, per-node errors as events, the attempt number, the outcome and
// the validity left), redfence.fence, redfence.extend and redfence.release.
// Only for New. The default is otel.GetTracerProvider() as it is when New
// runs; while that is OpenTelemetry's unset global or a no-op provider,
// redfence makes no tracing calls at all.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *core.Config) { c.TracerProvider = tp })
}

// WithMeterProvider sets where metrics go: redfence.acquire.duration and
// redfence.lock.wait (histograms, seconds, by outcome), redfence.acquisitions
// (by outcome: acquired, contended, unavailable, cancelled),
// redfence.lease.hold (seconds), redfence.leases.lost and
// redfence.node.errors (by node and operation). Only for New. The default is
// otel.GetMeterProvider() as it is when New runs; while that is
// OpenTelemetry's unset global or a no-op provider, redfence records
// nothing.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *core.Config) { c.MeterProvider = mp })
}

// WithReplicaAcks makes every acquire and extend wait, in the same pipeline
// (WAIT), until n replicas of the primary acknowledged it, for at most
// timeout. An acquire they do not acknowledge deletes its key and fails with
// ErrNotAcquired and a *ReplicaAckError; an extend does not extend. Every
// request is then bounded by node timeout + timeout, which must be below
// TTL/2 and within the client's ReadTimeout. Only for NewSingle
// (single.New), not per Mutex, not with a Ring; n in [0, 100], timeout at
// least 1ms. What it buys and costs: docs/topologies.md, Replica
// acknowledgement. The default is off.
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetReplicaAcks(n, timeout) })
}
