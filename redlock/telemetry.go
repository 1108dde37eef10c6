package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redfence/redfence/internal/quorum"
)

const scopeName = "github.com/redfence/redfence" // of the spans and metrics

// Outcomes of an acquisition, the metrics' "outcome" attribute.
const (
	outcomeAcquired    = "acquired"
	outcomeContended   = "contended"   // another owner holds the key on too many nodes
	outcomeUnavailable = "unavailable" // nodes failed, timed out or are quarantined
	outcomeCancelled   = "cancelled"   // the caller's context ended
)

// telemetry holds the logger, tracer and instruments of one Client.
type telemetry struct {
	log    *slog.Logger
	tracer trace.Tracer
	// tracing and metering are off while the providers are unset, keeping
	// the calls off the hot path.
	tracing, metering bool

	acquireDur   metric.Float64Histogram
	waitDur      metric.Float64Histogram
	acquisitions metric.Int64Counter
	holdDur      metric.Float64Histogram
	lost         metric.Int64Counter
	nodeErrors   metric.Int64Counter

	byOutcome map[string]outcomeOpts // built once: recording allocates nothing
}

type outcomeOpts struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

func newTelemetry(cfg config) *telemetry {
	t := &telemetry{log: cmp.Or(cfg.logger, slog.New(slog.NewTextHandler(io.Discard, nil))), byOutcome: map[string]outcomeOpts{}}
	for _, o := range []string{outcomeAcquired, outcomeContended, outcomeUnavailable, outcomeCancelled} {
		a := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
		t.byOutcome[o] = outcomeOpts{rec: []metric.RecordOption{a}, add: []metric.AddOption{a}}
	}
	// cmp.Or compares with the nil interface only, which never panics.
	tp := cmp.Or(cfg.tracerProvider, otel.GetTracerProvider())
	t.tracer, t.tracing = tp.Tracer(scopeName), !unset(tp)
	mp := cmp.Or(cfg.meterProvider, otel.GetMeterProvider())
	t.metering = !unset(mp)
	m := mp.Meter(scopeName)
	// Only invalid names fail, and a failed instrument is a no-op.
	seconds := func(name, desc string) metric.Float64Histogram {
		h, _ := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, _ := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	t.acquireDur = seconds("redfence.acquire.duration", "Duration of one acquire attempt (TryLock), by outcome.")
	t.waitDur = seconds("redfence.lock.wait", "Time from calling Lock to its return, retries included, by outcome.")
	t.acquisitions = count("redfence.acquisitions", "{attempt}", "Acquire attempts by outcome: acquired, contended, unavailable, cancelled.")
	t.holdDur = seconds("redfence.lease.hold", "Time from acquisition to release.")
	t.lost = count("redfence.leases.lost", "{lease}", "Leases that ended before release: validity ran out or a majority lost the value.")
	t.nodeErrors = count("redfence.node.errors", "{error}", "Failed or refused node calls, by node and operation (refusals by another owner excluded).")
	return t
}

// unset reports whether p is the global provider before any was set, or a
// no-op one: what it would record goes nowhere.
func unset(p any) bool {
	return slices.Contains([]string{"*global.tracerProvider", "*global.meterProvider", "noop.TracerProvider", "noop.MeterProvider"},
		fmt.Sprintf("%T", p))
}

var noSpan trace.Span = tracenoop.Span{}

func (t *telemetry) start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.tracing {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name, opts...)
}

func classify(err error) string {
	switch {
	case err == nil:
		return outcomeAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCancelled
	}
	var qe *QuorumError
	if errors.As(err, &qe) {
		taken := 0
		for _, n := range qe.Nodes {
			if errors.Is(n.Err, ErrTaken) {
				taken++
			}
		}
		// Contention decides it when the refusals alone rule out a majority.
		if total := qe.Got + len(qe.Nodes); total > 0 && taken > total-qe.Need {
			return outcomeContended
		}
	}
	return outcomeUnavailable
}

func (t *telemetry) nodeReplies(ctx context.Context, span trace.Span, op string, nodes []node, replies []quorum.Reply[int64]) {
	recording := span.IsRecording()
	for _, rep := range replies {
		if rep.Err == nil {
			continue
		}
		if !errors.Is(rep.Err, ErrTaken) {
			t.nodeErrors.Add(ctx, 1, metric.WithAttributes(
				attribute.String("redfence.node", nodes[rep.Index].addr), attribute.String("redfence.op", op)))
		}
		if recording {
			span.AddEvent("node error", trace.WithAttributes(
				attribute.Int("redfence.node.index", rep.Index),
				attribute.String("redfence.node", nodes[rep.Index].addr),
				attribute.String("error", rep.Err.Error())))
		}
	}
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
