package single

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/redlock"
)

// Option configures a Client (defaults for its mutexes) or one Mutex
// (overrides); it is redlock.Option. Each option below is redlock's of the
// same name, documented there, with the same default except where it says.
type Option = redlock.Option

// WithTTL sets how long a lock key lives. The default is 8s.
func WithTTL(d time.Duration) Option { return redlock.WithTTL(d) }

// WithNodeTimeout bounds each request to Redis. The default is TTL/10, at
// least 5ms and at most 100ms.
func WithNodeTimeout(d time.Duration) Option { return redlock.WithNodeTimeout(d) }

// WithDriftFactor sets the clock drift allowance, as a fraction of the TTL. The
// default is 0.01.
func WithDriftFactor(f float64) Option { return redlock.WithDriftFactor(f) }

// WithRetry sets Lock's retry policy, as a factory. The default is jittered
// exponential back-off from 20ms to 500ms, with no limit on attempts.
func WithRetry(f func() backoff.BackOff) Option { return redlock.WithRetry(f) }

// WithKeyPrefix sets a prefix for lock keys. The default is none.
func WithKeyPrefix(p string) Option { return redlock.WithKeyPrefix(p) }

// WithFencing turns fencing tokens on. The default is off.
func WithFencing() Option { return redlock.WithFencing() }

// WithFenceRetention sets how long a fence hash outlives its last write. The
// default is 1 hour, or twice the TTL if longer.
func WithFenceRetention(d time.Duration) Option { return redlock.WithFenceRetention(d) }

// WithQuarantine turns on the restart quarantine with d as the longest TTL
// of any lock on this Redis. The default here is off, because a restart of
// the one Redis then costs d of unavailability; turn it on where a double
// holder after a restart matters more. Not with a Cluster client.
func WithQuarantine(d time.Duration) Option { return redlock.WithQuarantine(d) }

// WithReplicaAcks makes every acquire and extend wait until n replicas have
// acknowledged it, for at most timeout (WAIT, in the same pipeline): see
// redlock.WithReplicaAcks for what it buys, what it does not, and what it
// costs. The default is off.
func WithReplicaAcks(n int, timeout time.Duration) Option { return redlock.WithReplicaAcks(n, timeout) }

// WithWakeup turns the wake-up of waiting Lock calls on or off. The default
// is on.
func WithWakeup(on bool) Option { return redlock.WithWakeup(on) }

// WithLogger sets the logger. The default is silent.
func WithLogger(l *slog.Logger) Option { return redlock.WithLogger(l) }

// WithTracerProvider sets where spans go. The default is the global provider
// as set when New runs (redlock.WithTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option { return redlock.WithTracerProvider(tp) }

// WithMeterProvider sets where metrics go. The default is the global provider
// as set when New runs (redlock.WithMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option { return redlock.WithMeterProvider(mp) }
