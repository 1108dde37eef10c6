package redlock

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cenkalti/backoff/v4"
)

// Defaults and limits (docs/design.md, Options and defaults).
const (
	defaultTTL            = 8 * time.Second
	defaultDrift          = 0.01
	maxDefaultNodeTimeout = 100 * time.Millisecond
	minTTL                = 10 * time.Millisecond
	minNodeTimeout        = time.Millisecond // no round trip through a client is reliably faster
	minDefaultNodeTimeout = 5 * time.Millisecond
	defaultQuarantine     = 60 * time.Second // over several nodes
	// extraDrift is added to TTL*drift: Redis expires with 1ms precision, plus
	// 1ms of margin for short TTLs (as in the reference implementation).
	extraDrift            = 2 * time.Millisecond
	defaultFenceRetention = time.Hour // or twice the TTL if longer
	// minFenceRetention: a counter must outlive its last write by more than
	// 1.5 TTL + 2*clockBound (docs/fencing.md, The proof).
	minFenceRetention = 10 * time.Second
	// clockBound is fencing's assumption: every node's clock is within this
	// of true time (docs/fencing.md, Assumptions).
	clockBound     = time.Second
	maxReplicaAcks = 100 // no deployment has more replicas per primary
)

// config holds every tunable of a lock: the defaults with the Client's
// options applied, then, for a Mutex, its own (newConfig).
type config struct {
	ttl            time.Duration
	nodeTimeout    time.Duration
	drift          float64
	retry          func() backoff.BackOff
	keyPrefix      string
	fenced         bool
	quarantine     time.Duration // 0: off
	fenceRetention time.Duration
	// timeoutSet, retentionSet: given, not derived from the TTL by resolve.
	timeoutSet, retentionSet bool
	noClockFloor             bool // tests only: the control that shows what the floor prevents
	// The rest is the Client's alone, ignored in a Mutex's options.
	replicaAcks int // 0: off
	ackTimeout  time.Duration
	noWakeup    bool
	// nil: a silent logger, the global OTel providers.
	logger         *slog.Logger
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// newConfig applies opts, in order, onto the defaults.
func newConfig(opts ...[]Option) config {
	c := config{ttl: defaultTTL, drift: defaultDrift, retry: defaultRetry}
	for _, o := range slices.Concat(opts...) {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// defaultRetry is the retry policy used when none is given: 20ms to 500ms,
// randomised by +-50% so that competing clients fall out of step, unlimited.
func defaultRetry() backoff.BackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(20*time.Millisecond), backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(1.6), backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
}

func (c config) resolve(pkg string) (config, error) {
	if !c.timeoutSet {
		c.nodeTimeout = defaultNodeTimeout(c.ttl)
	}
	if !c.retentionSet {
		c.fenceRetention = max(defaultFenceRetention, 2*c.ttl)
	}
	if c.replicaAcks == 0 {
		c.ackTimeout = 0 // off: no wait in the round timeout
	}
	least := max(minFenceRetention, 2*c.ttl)
	switch {
	case c.ttl <= 0:
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be positive, got " + c.ttl.String()}
	case c.ttl < minTTL:
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be at least " + minTTL.String() + " (Redis expires with millisecond precision and validity subtracts drift), got " + c.ttl.String()}
	case !(c.drift > 0 && c.drift < 0.1): // also rejects NaN
		return c, &ConfigError{Pkg: pkg, Field: "drift factor", Msg: "must be in (0, 0.1)"}
	case c.nodeTimeout <= 0:
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be positive, got " + c.nodeTimeout.String()}
	case c.nodeTimeout < minNodeTimeout:
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be at least " + minNodeTimeout.String() + ", got " + c.nodeTimeout.String()}
	case c.nodeTimeout >= c.ttl/2:
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: c.nodeTimeout.String() + " must be below half the TTL (" + (c.ttl / 2).String() + ")"}
	case c.quarantine < 0:
		return c, &ConfigError{Pkg: pkg, Field: "quarantine", Msg: "must be 0 (off) or positive, got " + c.quarantine.String()}
	case c.quarantine > 0 && c.ttl > c.quarantine:
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: c.ttl.String() + " exceeds the restart quarantine of " + c.quarantine.String() +
			": a restarted node would vote again while a lock it forgot could still be held (raise WithQuarantine, or lower the TTL)"}
	case c.replicaAcks < 0 || c.replicaAcks > maxReplicaAcks:
		return c, &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("the replica count must be in [0, %d] (0: off), got %d", maxReplicaAcks, c.replicaAcks)}
	case c.replicaAcks != 0 && c.ackTimeout < time.Millisecond:
		return c, &ConfigError{Pkg: pkg, Field: "replica acks", Msg: "the acknowledgement timeout must be at least 1ms (WAIT counts in milliseconds), got " + c.ackTimeout.String()}
	case c.replicaAcks != 0 && c.roundTimeout() >= c.ttl/2:
		return c, &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("node timeout %v + acknowledgement timeout %v must be below half the TTL (%v): a lease write waits for both",
			c.nodeTimeout, c.ackTimeout, c.ttl/2)}
	case c.fenceRetention < least:
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at least " + least.String() + " (10s, and twice the TTL), got " + c.fenceRetention.String()}
	case c.fenceRetention > 100*365*24*time.Hour:
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at most 100 years, got " + c.fenceRetention.String()}
	case c.retry == nil:
		return c, &ConfigError{Pkg: pkg, Field: "retry", Msg: "the back-off factory is nil (use backoff.StopBackOff for no retries)"}
	}
	return c, nil
}

// defaultNodeTimeout is TTL/10, at least 5ms (but at most TTL/3, below the
// TTL/2 limit) and at most 100ms: TTL/10 alone leaves 1ms at the 10ms TTL.
func defaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, min(minDefaultNodeTimeout, ttl/3)), maxDefaultNodeTimeout)
}

func (c config) driftAllowance() time.Duration {
	return time.Duration(float64(c.ttl)*c.drift) + extraDrift
}

func (c config) validity(elapsed time.Duration) time.Duration {
	return c.ttl - elapsed - c.driftAllowance()
}

// roundTimeout bounds each node's part in a round: any request may share a
// pipeline with a WAIT.
func (c config) roundTimeout() time.Duration { return c.nodeTimeout + c.ackTimeout }
