package core

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/quorum"
)

// ScopeName is the instrumentation scope of redfence's spans and metrics.
const ScopeName = "github.com/redfence/redfence"

// Outcomes of an acquisition, the "outcome" attribute of the acquisition
// metrics.
const (
	OutcomeAcquired    = "acquired"
	OutcomeContended   = "contended"   // another owner holds the key on too many nodes
	OutcomeUnavailable = "unavailable" // nodes failed, timed out or are quarantined
	OutcomeCancelled   = "cancelled"   // the caller's context ended
)

// Telemetry holds the logger, tracer and instruments of one engine. The zero
// value is not usable: use newTelemetry.
type telemetry struct {
	log    *slog.Logger
	tracer trace.Tracer

	acquireDur   metric.Float64Histogram
	waitDur      metric.Float64Histogram
	acquisitions metric.Int64Counter
	holdDur      metric.Float64Histogram
	lost         metric.Int64Counter
	nodeErrors   metric.Int64Counter

	// byOutcome caches the measurement option of each outcome, so that
	// recording allocates no attribute set.
	byOutcome map[string]metric.MeasurementOption
}

// outcomeOpt returns the cached attribute option for outcome.
func (t *telemetry) outcomeOpt(outcome string) metric.MeasurementOption {
	if o, ok := t.byOutcome[outcome]; ok {
		return o
	}
	return metric.WithAttributes(attribute.String("outcome", outcome))
}

func newTelemetry(cfg Config) *telemetry {
	t := &telemetry{log: cfg.Logger, byOutcome: map[string]metric.MeasurementOption{}}
	for _, o := range []string{OutcomeAcquired, OutcomeContended, OutcomeUnavailable, OutcomeCancelled} {
		t.byOutcome[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	if t.log == nil {
		t.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t.tracer = tp.Tracer(ScopeName)
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	// Instrument creation only fails for invalid names; ours are constant
	// and valid, and a failed instrument is a no-op, so errors are ignored.
	t.acquireDur, _ = m.Float64Histogram("redfence.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one acquire attempt (TryLock), by outcome."))
	t.waitDur, _ = m.Float64Histogram("redfence.lock.wait", metric.WithUnit("s"),
		metric.WithDescription("Time from calling Lock to its return, retries included, by outcome."))
	t.acquisitions, _ = m.Int64Counter("redfence.acquisitions", metric.WithUnit("{attempt}"),
		metric.WithDescription("Acquire attempts by outcome: acquired, contended, unavailable, cancelled."))
	t.holdDur, _ = m.Float64Histogram("redfence.lease.hold", metric.WithUnit("s"),
		metric.WithDescription("Time from acquisition to release."))
	t.lost, _ = m.Int64Counter("redfence.leases.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended before release: validity ran out or a majority lost the value."))
	t.nodeErrors, _ = m.Int64Counter("redfence.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed or refused node calls, by node and operation (refusals by another owner excluded)."))
	return t
}

// classify returns the outcome of a failed acquire.
func classify(err error) string {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCancelled
	case errors.As(err, new(turnError)):
		return OutcomeContended // a queued Lock: the key is held or awaited in this client
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
			return OutcomeContended
		}
	}
	return OutcomeUnavailable
}

// nodeReplies records per-node errors on the span and the node-error counter.
func (t *telemetry) nodeReplies(ctx context.Context, span trace.Span, op string, nodes []Node, replies []quorum.Reply[int64]) {
	recording := span.IsRecording()
	for _, rep := range replies {
		if rep.Err == nil {
			continue
		}
		if !errors.Is(rep.Err, ErrTaken) {
			t.nodeErrors.Add(ctx, 1, metric.WithAttributes(
				attribute.String("redfence.node", nodes[rep.Index].Addr), attribute.String("redfence.op", op)))
		}
		if recording {
			span.AddEvent("node error", trace.WithAttributes(
				attribute.Int("redfence.node.index", rep.Index),
				attribute.String("redfence.node", nodes[rep.Index].Addr),
				attribute.String("error", rep.Err.Error())))
		}
	}
}

// endSpan sets the span's status from err and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func seconds(d time.Duration) float64 { return d.Seconds() }
