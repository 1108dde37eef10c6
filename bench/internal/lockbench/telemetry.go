package lockbench

import (
	"context"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/redlock"
)

// telemetryOptions returns redlock options that turn telemetry fully on:
// every span sampled and ended into a processor that drops it (so the cost
// measured is redfence's instrumentation plus the SDK, not an exporter's
// I/O), and metrics recorded into a manual reader.
func telemetryOptions() []redlock.Option {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(dropProcessor{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	return []redlock.Option{redlock.WithTelemetry(tp, mp)}
}

// dropProcessor receives every span and keeps none.
type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }
