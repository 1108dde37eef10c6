package core

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
	DefaultTTL            = 8 * time.Second
	DefaultDrift          = 0.01
	MaxDefaultNodeTimeout = 100 * time.Millisecond
	MinTTL                = 10 * time.Millisecond
	// MinNodeTimeout is the shortest per-node timeout accepted: no Redis
	// round trip through a client is reliably faster.
	MinNodeTimeout = time.Millisecond
	// MinDefaultNodeTimeout is the shortest default per-node timeout (TTL/10
	// unless that is shorter), itself capped at TTL/3 for TTLs under 15ms.
	MinDefaultNodeTimeout = 5 * time.Millisecond
	// DefaultQuarantine is redlock's default restart quarantine.
	DefaultQuarantine = 60 * time.Second
	// ExtraDrift is added to TTL*drift: Redis expires with 1ms precision, plus
	// 1ms of margin for short TTLs (as in the reference implementation).
	ExtraDrift = 2 * time.Millisecond
	// DefaultFenceRetention is how long a fence hash outlives its last write,
	// or twice the TTL if that is longer.
	DefaultFenceRetention = time.Hour
	// MinFenceRetention is the shortest retention accepted (nor may it be
	// below twice the TTL): a counter must outlive its last write by more
	// than 1.5 TTL + 2*ClockBound (docs/fencing.md, The proof).
	MinFenceRetention = 10 * time.Second
	// ClockBound is the clock assumption of fencing: every node's clock is
	// within this of true time (docs/fencing.md, Assumptions).
	ClockBound = time.Second
)

// Config holds every tunable of a lock. The zero value means "defaults".
type Config struct {
	TTL         time.Duration
	NodeTimeout time.Duration // unset: DefaultNodeTimeout(TTL)
	Drift       float64       // 0: DefaultDrift
	Retry       func() backoff.BackOff
	KeyPrefix   string
	Fencing     bool
	// Quarantine is the restart quarantine: the longest TTL any lock on the
	// nodes uses. A node that may have lost its data sits out this long. 0
	// turns it off.
	Quarantine time.Duration
	// FenceRetention is how long a fence hash lives after its last write
	// (unset: max(DefaultFenceRetention, 2*TTL)). A counter that expired is no worse than one
	// that was lost: the clock floor keeps tokens increasing.
	FenceRetention time.Duration
	// noClockFloor turns the clock floor off, back to counter-only tokens.
	// Tests only: it is the control that shows what the floor prevents.
	noClockFloor bool
	// ReplicaAcks is how many replicas must acknowledge each acquire and
	// extend (WAIT) within AckTimeout; 0 turns it off. Client-level only.
	ReplicaAcks int
	AckTimeout  time.Duration
	// NoWakeup turns off the wake-up of waiting Lock calls (the local FIFO
	// queue per key and the release notices over pub/sub): every Lock then
	// polls under its retry policy alone. Client-level only.
	NoWakeup bool
	// Logger, TracerProvider and MeterProvider are client-level telemetry
	// (ignored in NewMutex overrides). nil: silent logger, the global OTel
	// providers.
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	ttlSet, timeoutSet, driftSet, retrySet, prefixSet, fencingSet, quarantineSet, retentionSet bool
}

// Set helpers record that a field was given explicitly, so that overrides in
// NewMutex replace only what they name.

// SetTTL sets the TTL.
func (c *Config) SetTTL(d time.Duration) { c.TTL, c.ttlSet = d, true }

// SetNodeTimeout sets the per-node timeout.
func (c *Config) SetNodeTimeout(d time.Duration) { c.NodeTimeout, c.timeoutSet = d, true }

// SetDrift sets the drift factor.
func (c *Config) SetDrift(f float64) { c.Drift, c.driftSet = f, true }

// SetRetry sets the retry policy factory.
func (c *Config) SetRetry(f func() backoff.BackOff) { c.Retry, c.retrySet = f, true }

// SetKeyPrefix sets the key prefix.
func (c *Config) SetKeyPrefix(p string) { c.KeyPrefix, c.prefixSet = p, true }

// SetFencing turns fencing tokens on or off.
func (c *Config) SetFencing(on bool) { c.Fencing, c.fencingSet = on, true }

// SetQuarantine sets the restart quarantine (0: off).
func (c *Config) SetQuarantine(d time.Duration) { c.Quarantine, c.quarantineSet = d, true }

// SetFenceRetention sets how long a fence hash outlives its last write.
func (c *Config) SetFenceRetention(d time.Duration) { c.FenceRetention, c.retentionSet = d, true }

// DisableClockFloor turns the clock floor of fencing tokens off. For tests
// only: the control that shows what the floor prevents.
func (c *Config) DisableClockFloor() { c.noClockFloor = true }

// QuarantineSet reports whether SetQuarantine was called.
func (c Config) QuarantineSet() bool { return c.quarantineSet }

// Merge returns base with every field that over set explicitly replaced.
func Merge(base, over Config) Config {
	out := base
	take(&out.TTL, &out.ttlSet, over.TTL, over.ttlSet)
	take(&out.NodeTimeout, &out.timeoutSet, over.NodeTimeout, over.timeoutSet)
	take(&out.Drift, &out.driftSet, over.Drift, over.driftSet)
	take(&out.Retry, &out.retrySet, over.Retry, over.retrySet)
	take(&out.Fencing, &out.fencingSet, over.Fencing, over.fencingSet)
	take(&out.Quarantine, &out.quarantineSet, over.Quarantine, over.quarantineSet)
	take(&out.FenceRetention, &out.retentionSet, over.FenceRetention, over.retentionSet)
	take(&out.KeyPrefix, &out.prefixSet, over.KeyPrefix, over.prefixSet)
	out.noClockFloor = out.noClockFloor || over.noClockFloor
	return out
}

// take replaces a field and marks it set when the override set it.
func take[T any](field *T, fieldSet *bool, v T, set bool) {
	if set {
		*field, *fieldSet = v, true
	}
}

// DefaultRetry is the retry policy used when none is given: exponential
// back-off from 20ms up to 500ms between attempts, each delay randomised by
// +-50% so that competing clients fall out of step, with no limit on the
// number of attempts (the caller's context bounds Lock).
func DefaultRetry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.Multiplier = 1.6
	b.MaxInterval = 500 * time.Millisecond
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Resolve fills in defaults and validates. pkg names the package in errors.
func (c Config) Resolve(pkg string) (Config, error) {
	if !c.ttlSet {
		c.TTL = DefaultTTL
	}
	if c.TTL <= 0 {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be positive, got " + c.TTL.String()}
	}
	if c.TTL < MinTTL {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: "must be at least " + MinTTL.String() + " (Redis expires with millisecond precision and validity subtracts drift), got " + c.TTL.String()}
	}
	if !c.driftSet {
		c.Drift = DefaultDrift
	}
	if !(c.Drift > 0 && c.Drift < 0.1) { // also rejects NaN
		return c, &ConfigError{Pkg: pkg, Field: "drift factor", Msg: "must be in (0, 0.1)"}
	}
	if !c.timeoutSet {
		c.NodeTimeout = DefaultNodeTimeout(c.TTL)
	}
	if c.NodeTimeout <= 0 {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be positive, got " + c.NodeTimeout.String()}
	}
	if c.NodeTimeout < MinNodeTimeout {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: "must be at least " + MinNodeTimeout.String() + ", got " + c.NodeTimeout.String()}
	}
	if c.NodeTimeout >= c.TTL/2 {
		return c, &ConfigError{Pkg: pkg, Field: "node timeout", Msg: c.NodeTimeout.String() + " must be below half the TTL (" + (c.TTL / 2).String() + ")"}
	}
	if c.Quarantine < 0 {
		return c, &ConfigError{Pkg: pkg, Field: "quarantine", Msg: "must be 0 (off) or positive, got " + c.Quarantine.String()}
	}
	if c.Quarantine > 0 && c.TTL > c.Quarantine {
		return c, &ConfigError{Pkg: pkg, Field: "TTL", Msg: c.TTL.String() + " exceeds the restart quarantine of " + c.Quarantine.String() +
			": a restarted node would vote again while a lock it forgot could still be held (raise WithQuarantine, or lower the TTL)"}
	}
	if err := c.resolveAcks(pkg); err != nil {
		return c, err
	}
	if !c.retentionSet {
		c.FenceRetention = max(DefaultFenceRetention, 2*c.TTL)
	}
	if least := max(MinFenceRetention, 2*c.TTL); c.FenceRetention < least {
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at least " + least.String() + " (10s, and twice the TTL), got " + c.FenceRetention.String()}
	}
	if c.FenceRetention > 100*365*24*time.Hour {
		return c, &ConfigError{Pkg: pkg, Field: "fence retention", Msg: "must be at most 100 years, got " + c.FenceRetention.String()}
	}
	if !c.retrySet {
		c.Retry = DefaultRetry
	}
	if c.Retry == nil {
		return c, &ConfigError{Pkg: pkg, Field: "retry", Msg: "the back-off factory is nil (use backoff.StopBackOff for no retries)"}
	}
	return c, nil
}

// DefaultNodeTimeout is the per-node timeout used when none is given: TTL/10,
// but at least MinDefaultNodeTimeout (and then at most TTL/3, which is below
// the TTL/2 limit) and at most MaxDefaultNodeTimeout. TTL/10 alone leaves
// 1ms at the 10ms minimum TTL, too short for a fan-out to answer.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, min(MinDefaultNodeTimeout, ttl/3)), MaxDefaultNodeTimeout)
}

// DriftAllowance is TTL*drift + 2ms.
func (c Config) DriftAllowance() time.Duration {
	return time.Duration(float64(c.TTL)*c.Drift) + ExtraDrift
}

// Validity returns what is left of the TTL after elapsed and the drift
// allowance. It may be zero or negative.
func (c Config) Validity(elapsed time.Duration) time.Duration {
	return c.TTL - elapsed - c.DriftAllowance()
}

// MaxReplicaAcks bounds WithReplicaAcks' replica count: no deployment has
// more replicas per primary.
const MaxReplicaAcks = 100

// SetReplicaAcks asks for n replica acknowledgements of each acquire and
// extend within timeout (n = 0: off).
func (c *Config) SetReplicaAcks(n int, timeout time.Duration) {
	c.ReplicaAcks, c.AckTimeout = n, timeout
	if n == 0 {
		c.AckTimeout = 0
	}
}

func (c Config) resolveAcks(pkg string) error {
	switch {
	case c.ReplicaAcks == 0:
		return nil
	case c.ReplicaAcks < 0 || c.ReplicaAcks > MaxReplicaAcks:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("the replica count must be in [0, %d] (0: off), got %d", MaxReplicaAcks, c.ReplicaAcks)}
	case c.AckTimeout < time.Millisecond:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: "the acknowledgement timeout must be at least 1ms (WAIT counts in milliseconds), got " + c.AckTimeout.String()}
	case c.RoundTimeout() >= c.TTL/2:
		return &ConfigError{Pkg: pkg, Field: "replica acks", Msg: fmt.Sprintf("node timeout %v + acknowledgement timeout %v must be below half the TTL (%v): a lease write waits for both",
			c.NodeTimeout, c.AckTimeout, c.TTL/2)}
	}
	return nil
}

// RoundTimeout bounds each node's part in a round: the node timeout, plus
// the acknowledgement timeout with replica acks on (any request may share a
// pipeline with a WAIT).
func (c Config) RoundTimeout() time.Duration { return c.NodeTimeout + c.AckTimeout }
