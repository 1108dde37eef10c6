package redlock

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cenkalti/backoff/v4"
)

// Defaults. The public packages document these values on their options.
const (
	defaultTTL            = 8 * time.Second
	defaultDrift          = 0.01
	maxDefaultNodeTimeout = 100 * time.Millisecond
	minTTL                = 10 * time.Millisecond
	// minNodeTimeout is the shortest per-node timeout accepted: no Redis
	// round trip through a client is reliably faster.
	minNodeTimeout = time.Millisecond
	// minDefaultNodeTimeout is the shortest default per-node timeout (TTL/10
	// unless that is shorter), itself capped at TTL/3 for TTLs under 15ms.
	minDefaultNodeTimeout = 5 * time.Millisecond
	// defaultQuarantine is redlock's default restart quarantine.
	defaultQuarantine = 60 * time.Second
	// extraDrift is added to TTL*drift: Redis expires with 1ms precision, plus
	// 1ms of margin for short TTLs (as in the reference implementation).
	extraDrift = 2 * time.Millisecond
	// defaultFenceRetention is how long a fence hash outlives its last write,
	// or twice the TTL if that is longer.
	defaultFenceRetention = time.Hour
	// minFenceRetention is the shortest retention accepted (nor may it be
	// below twice the TTL): a counter must outlive its last write by more
	// than 1.5 TTL + 2*ClockBound (docs/fencing.md, The proof).
	minFenceRetention = 10 * time.Second
	// clockBound is the clock assumption of fencing: every node's clock is
	// within this of true time (docs/fencing.md, Assumptions).
	clockBound = time.Second
)

// config holds every tunable of a lock. The zero value means "defaults".
type config struct {
	ttl         time.Duration
	nodeTimeout time.Duration // unset: DefaultNodeTimeout(TTL)
	drift       float64       // 0: DefaultDrift
	retry       func() backoff.BackOff
	keyPrefix   string
	fenced      bool
	// quarantine is the restart quarantine: the longest TTL any lock on the
	// nodes uses. A node that may have lost its data sits out this long. 0
	// turns it off.
	quarantine time.Duration
	// fenceRetention is how long a fence hash lives after its last write
	// (unset: max(DefaultFenceRetention, 2*TTL)). A counter that expired is no worse than one
	// that was lost: the clock floor keeps tokens increasing.
	fenceRetention time.Duration
	// noClockFloor turns the clock floor off, back to counter-only tokens.
	// Tests only: it is the control that shows what the floor prevents.
	noClockFloor bool
	// replicaAcks is how many replicas must acknowledge each acquire and
	// extend (WAIT) within AckTimeout; 0 turns it off. Client-level only.
	replicaAcks int
	ackTimeout  time.Duration
	// noWakeup turns off the wake-up of waiting Lock calls (the local FIFO
	// queue per key and the release notices over pub/sub): every Lock then
	// polls under its retry policy alone. Client-level only.
	noWakeup bool
	// logger, TracerProvider and MeterProvider are client-level telemetry
	// (ignored in NewMutex overrides). nil: silent logger, the global OTel
	// providers.
	logger         *slog.Logger
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider

	ttlSet, timeoutSet, driftSet, retrySet, prefixSet, fencingSet, quarantineSet, retentionSet bool
}

// Set helpers record that a field was given explicitly, so that overrides in
// NewMutex replace only what they name.

// setTTL sets the TTL.
func (c *config) setTTL(d time.Duration) { c.ttl, c.ttlSet = d, true }

// setNodeTimeout sets the per-node timeout.
func (c *config) setNodeTimeout(d time.Duration) { c.nodeTimeout, c.timeoutSet = d, true }

// setDrift sets the drift factor.
func (c *config) setDrift(f float64) { c.drift, c.driftSet = f, true }

// setRetry sets the retry policy factory.
func (c *config) setRetry(f func() backoff.BackOff) { c.retry, c.retrySet = f, true }

// setKeyPrefix sets the key prefix.
func (c *config) setKeyPrefix(p string) { c.keyPrefix, c.prefixSet = p, true }

// setFencing turns fencing tokens on or off.
func (c *config) setFencing(on bool) { c.fenced, c.fencingSet = on, true }

// setQuarantine sets the restart quarantine (0: off).
func (c *config) setQuarantine(d time.Duration) { c.quarantine, c.quarantineSet = d, true }

// setFenceRetention sets how long a fence hash outlives its last write.
func (c *config) setFenceRetention(d time.Duration) { c.fenceRetention, c.retentionSet = d, true }

// disableClockFloor turns the clock floor of fencing tokens off. For tests
// only: the control that shows what the floor prevents.
func (c *config) disableClockFloor() { c.noClockFloor = true }

// hasQuarantine reports whether SetQuarantine was called.
func (c config) hasQuarantine() bool { return c.quarantineSet }

// merge returns base with every field that over set explicitly replaced.
func merge(base, over config) config {
	out := base
	take(&out.ttl, &out.ttlSet, over.ttl, over.ttlSet)
	take(&out.nodeTimeout, &out.timeoutSet, over.nodeTimeout, over.timeoutSet)
	take(&out.drift, &out.driftSet, over.drift, over.driftSet)
	take(&out.retry, &out.retrySet, over.retry, over.retrySet)
	take(&out.fenced, &out.fencingSet, over.fenced, over.fencingSet)
	take(&out.quarantine, &out.quarantineSet, over.quarantine, over.quarantineSet)
	take(&out.fenceRetention, &out.retentionSet, over.fenceRetention, over.retentionSet)
	take(&out.keyPrefix, &out.prefixSet, over.keyPrefix, over.prefixSet)
	out.noClockFloor = out.noClockFloor || over.noClockFloor
	return out
}

// take replaces a field and marks it set when the override set it.
func take[T any](field *T, fieldSet *bool, v T, set bool) {
	if set {
		*field, *fieldSet = v, true
	}
}

// defaultRetry is the retry policy used when none is given: exponential
// back-off from 20ms up to 500ms between attempts, each delay randomised by
// +-50% so that competing clients fall out of step, with no limit on the
// number of attempts (the caller's context bounds Lock).
func defaultRetry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.Multiplier = 1.6
	b.MaxInterval = 500 * time.Millisecond
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// resolve fills in defaults and validates. pkg names the package in errors.
func (c config) resolve(pkg string) (config, error) {
	if !c.ttlSet {
		c.ttl = defaultTTL
	}
	if c.ttl <= 0 {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be positive, got " + c.ttl.String()}
	}
	if c.ttl < minTTL {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be at least " + minTTL.String() + " (Redis expires with millisecond precision and validity subtracts drift), got " + c.ttl.String()}
	}
	if !c.driftSet {
		c.drift = defaultDrift
	}
	if !(c.drift > 0 && c.drift < 0.1) { // also rejects NaN
		return c, &ConfigError{Pkg: pkg, Field: "drift factor", Msg: "must be in (0, 0.1)"}
	}
	if !c.timeoutSet {
		c.nodeTimeout = defaultNodeTimeout(c.ttl)
	}
	if c.nodeTimeout <= 0 {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be positive, got " + c.nodeTimeout.String()}
	}
	if c.nodeTimeout < minNodeTimeout {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be at least " + minNodeTimeout.String() + ", got " + c.nodeTimeout.String()}
	}
	if c.nodeTimeout >= c.ttl/2 {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: c.nodeTimeout.String() + " must be below half the TTL (" + (c.ttl / 2).String() + ")"}
	}
	if c.quarantine < 0 {
		return c, &ConfigError{Pkg: pkg, Field: "quarantine", Msg: "must be 0 (off) or positive, got " + c.quarantine.String()}
	}
	if c.quarantine > 0 && c.ttl > c.quarantine {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: c.ttl.String() + " exceeds the restart quarantine of " + c.quarantine.String() +
			": a restarted node would vote again while a lock it forgot could still be held (raise WithQuarantine, or lower the TTL)"}
	}
	if err := c.resolveAcks(pkg); err != nil {
		return c, err
	}
	if !c.retentionSet {
		c.fenceRetention = max(defaultFenceRetention, 2*c.ttl)
	}
	if least := max(minFenceRetention, 2*c.ttl); c.fenceRetention < least {
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at least " + least.String() + " (10s, and twice the TTL), got " + c.fenceRetention.String()}
	}
	if c.fenceRetention > 100*365*24*time.Hour {
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at most 100 years, got " + c.fenceRetention.String()}
	}
	if !c.retrySet {
		c.retry = defaultRetry
	}
	if c.retry == nil {
		return c, &ConfigError{Pkg: pkg, Field: "retry", Msg: "the back-off factory is nil (use backoff.StopBackOff for no retries)"}
	}
	return c, nil
}

// defaultNodeTimeout is the per-node timeout used when none is given: TTL/10,
// but at least MinDefaultNodeTimeout (and then at most TTL/3, which is below
// the TTL/2 limit) and at most MaxDefaultNodeTimeout. TTL/10 alone leaves
// 1ms at the 10ms minimum TTL, too short for a fan-out to answer.
func defaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, min(minDefaultNodeTimeout, ttl/3)), maxDefaultNodeTimeout)
}

// driftAllowance is TTL*drift + 2ms.
func (c config) driftAllowance() time.Duration {
	return time.Duration(float64(c.ttl)*c.drift) + extraDrift
}

// validity returns what is left of the TTL after elapsed and the drift
// allowance. It may be zero or negative.
func (c config) validity(elapsed time.Duration) time.Duration {
	return c.ttl - elapsed - c.driftAllowance()
}

// maxReplicaAcks bounds WithReplicaAcks' replica count: no deployment has
// more replicas per primary.
const maxReplicaAcks = 100

// setReplicaAcks asks for n replica acknowledgements of each acquire and
// extend within timeout (n = 0: off).
func (c *config) setReplicaAcks(n int, timeout time.Duration) {
	c.replicaAcks, c.ackTimeout = n, timeout
	if n == 0 {
		c.ackTimeout = 0
	}
}

func (c config) resolveAcks(pkg string) error {
	switch {
	case c.replicaAcks == 0:
		return nil
	case c.replicaAcks < 0 || c.replicaAcks > maxReplicaAcks:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("the replica count must be in [0, %d] (0: off), got %d", maxReplicaAcks, c.replicaAcks)}
	case c.ackTimeout < time.Millisecond:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: "the acknowledgement timeout must be at least 1ms (WAIT counts in milliseconds), got " + c.ackTimeout.String()}
	case c.roundTimeout() >= c.ttl/2:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("node timeout %v + acknowledgement timeout %v must be below half the TTL (%v): a lease write waits for both",
			c.nodeTimeout, c.ackTimeout, c.ttl/2)}
	}
	return nil
}

// roundTimeout bounds each node's part in a round: the node timeout, plus
// the acknowledgement timeout with replica acks on (any request may share a
// pipeline with a WAIT).
func (c config) roundTimeout() time.Duration { return c.nodeTimeout + c.ackTimeout }
