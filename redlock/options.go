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

// WithQuarantine sets the restart quarantine to d, which must be at least the
// longest TTL of any lock on these nodes (a longer TTL is refused): a node
// that may have lost lock keys, because it restarted less than d ago (its
// uptime) or its data was flushed (its marker key redfence:node is missing),
// does not vote for d by its own clock. This is the Redlock paper's
// delayed-restart rule, enforced inside the acquire script; without it a node
// restarted empty lets a second client win a majority that overlaps the
// first's. A quarantined node's refusal is a NodeError wrapping
// ErrQuarantined with the time left. d = 0 turns the quarantine off (safe only
// if no node can lose acknowledged keys, e.g. appendfsync always; it also
// turns the acquire back into a plain SET NX, with no script). New nodes start quarantined:
// see Client.Vouch. It cannot be used with Redis Cluster clients. The default
// is 60s for New, and off (0) for NewSingle (single.New), where a restart of
// the one Redis would cost d of unavailability; turn it on there where a
// double holder after a restart matters more.
func WithQuarantine(d time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetQuarantine(d) })
}

// WithWakeup turns the wake-up of waiting Lock calls on or off. On, the Lock
// calls of one Client that want the same key queue in the order they came,
// and only the first in line asks Redis; the others wait for their turn
// (first come, first served within the Client). The first in line retries at
// once when a lease of the Client on the key ends, and when a majority of nodes announce a release
// by another client: the release script PUBLISHes on the channel
// "redfence:released:" + the full key, and the Client listens on one pub/sub connection per node,
// opened while some Lock call waits and closed by Close. The retry policy
// still paces and counts the attempts of every waiting call and bounds each
// wait, so a lost notice costs latency, never progress. Wake-up orders and
// wakes callers only: whether a Lock gets the lock is decided by Redis as
// before, and there is no fairness across Clients. An ACL user needs
// "&redfence:released:PREFIX* +publish +subscribe +unsubscribe" on top of the
// lock rule for notices (docs/topologies.md); without them the Client polls.
// Off, every Lock call polls under the retry policy alone and releases
// announce nothing. Only for New. The default is on.
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
// Only for New. The default is otel.GetTracerProvider(), a no-op until the
// application installs an SDK.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *core.Config) { c.TracerProvider = tp })
}

// WithMeterProvider sets where metrics go: redfence.acquire.duration and
// redfence.lock.wait (histograms, seconds, by outcome), redfence.acquisitions
// (by outcome: acquired, contended, unavailable, cancelled),
// redfence.lease.hold (seconds), redfence.leases.lost and
// redfence.node.errors (by node and operation). Only for New. The default is
// otel.GetMeterProvider(), a no-op until the application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *core.Config) { c.MeterProvider = mp })
}

// WithReplicaAcks makes every acquire and extend wait until n replicas of the
// primary have acknowledged it, for at most timeout. The WAIT goes behind the
// write in the same pipeline, on the same connection (over a Cluster, to the
// key's own primary), so it costs the replication lag, not another round
// trip. An acquire that fewer replicas acknowledge in time deletes what it
// wrote and fails with an error wrapping ErrNotAcquired and a
// *ReplicaAckError (errors.Is: ErrReplicaAcks); an extend that they do not
// acknowledge does not move ValidUntil and says so the same way. Lock retries
// under its retry policy as for any failed attempt.
//
// What it buys: an acknowledged lock key is on n replicas, and Sentinel
// promotes the most up-to-date replica it can reach, so a failover keeps
// the lock unless every acknowledging replica is unreachable or lost it
// too. What it does not: WAIT is not fsync, and it does not make Redis
// strongly consistent (a replica that acknowledged and then restarted
// without persistence forgets the key; a failover to a replica that did
// not acknowledge loses it): use fencing tokens where a second holder
// matters. What it costs: each lease write waits for the slowest of n
// replicas (docs/performance.md), and every request of the Client is
// bounded by node timeout + timeout, which must stay below TTL/2.
//
// n must be in [0, 100] (0 turns it off) and timeout at least 1ms. Only for
// NewSingle (single.New): New refuses it on more than one node, and NewMutex
// refuses it. It cannot be used with a Ring client,
// and the client's ReadTimeout must be at least node timeout + timeout
// (go-redis ends every read there, context deadlines or not; its default
// is 3s). CheckNodes reports the replicas
// that are online and their lag, and a risk when fewer than n are online.
// The default is off.
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return optionFunc(func(c *core.Config) { c.SetReplicaAcks(n, timeout) })
}
