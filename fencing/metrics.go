package fencing

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricChecks is the name of the counter every guard adds to for each token
// check, with attributes "guard" (memory, redis, sql) and "result":
// accepted, stale (a write rejected for an older token), invalid (a bad
// token or argument) or error (the store failed). It goes to the global
// OpenTelemetry MeterProvider unless a guard option names another; the
// global one records nothing until the application installs an SDK.
const MetricChecks = "redfence.fencing.checks"

// guardMetrics counts one guard kind's checks by result.
type guardMetrics struct {
	checks metric.Int64Counter
	opts   map[string]metric.MeasurementOption
}

func newGuardMetrics(mp metric.MeterProvider, guard string) *guardMetrics {
	m := &guardMetrics{opts: map[string]metric.MeasurementOption{}}
	// Creating a counter only fails for an invalid name; a failed one is a
	// no-op, so the error is ignored.
	m.checks, _ = mp.Meter("github.com/redfence/redfence/fencing").Int64Counter(MetricChecks,
		metric.WithUnit("{check}"),
		metric.WithDescription("Fencing token checks by guard and result (stale: a write rejected for an older token)."))
	for _, r := range []string{"accepted", "stale", "invalid", "error"} {
		m.opts[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("guard", guard), attribute.String("result", r)))
	}
	return m
}

// record counts one check with err's result.
func (m *guardMetrics) record(ctx context.Context, err error) {
	if m == nil {
		return
	}
	r := "error"
	switch {
	case err == nil:
		r = "accepted"
	case errors.Is(err, ErrStaleToken):
		r = "stale"
	case errors.Is(err, ErrInvalidToken), errors.Is(err, ErrInvalidArgument):
		r = "invalid"
	}
	m.checks.Add(ctx, 1, m.opts[r])
}

var globalGuardMetrics sync.Map // guard kind -> *guardMetrics on the global provider

// defaultGuardMetrics returns the metrics of a guard kind on the global
// MeterProvider, created once.
func defaultGuardMetrics(guard string) *guardMetrics {
	if m, ok := globalGuardMetrics.Load(guard); ok {
		return m.(*guardMetrics)
	}
	m, _ := globalGuardMetrics.LoadOrStore(guard, newGuardMetrics(otel.GetMeterProvider(), guard))
	return m.(*guardMetrics)
}

// memoryMetrics returns the MemoryGuard's metrics (global provider only: a
// MemoryGuard has no options).
func memoryMetrics() *guardMetrics { return defaultGuardMetrics("memory") }
