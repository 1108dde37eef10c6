package redlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// counts sums an Int64 sum metric's data points by their "outcome" attribute.
func counts(t *testing.T, rm metricdata.ResourceMetrics, name string) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is a sum", name)
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("outcome"))
				out[v.AsString()] += dp.Value
			}
		}
	}
	return out
}

// metricUnit returns the unit of the metric called name, and whether rm
// has it.
func metricUnit(rm metricdata.ResourceMetrics, name string) (string, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Unit, true
			}
		}
	}
	return "", false
}

func TestTelemetry(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	c := newClient(t, clients, redlock.WithTTL(time.Second), redlock.WithFencing(),
		redlock.WithTelemetry(tp, mp), redlock.WithLogger(logger))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)

	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx) // contended
	require.ErrorIs(t, err, redlock.ErrTaken)
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))

	// A lease lost: its keys vanish from a majority, Extend notices.
	l, err = m.TryLock(ctx)
	require.NoError(t, err)
	landedEverywhere(t, clients, key, l.Value()) // the stragglers, before deleting
	for _, cl := range clients[:2] {
		require.NoError(t, cl.Del(ctx, key).Err())
	}
	require.ErrorIs(t, l.Extend(ctx), redlock.ErrLost)

	// Unavailable: a majority paused.
	for _, n := range nodes[:2] {
		require.NoError(t, n.Pause())
	}
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	for _, n := range nodes[:2] {
		require.NoError(t, n.Resume())
	}
	// Cancelled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Lock(cctx)
	require.ErrorIs(t, err, context.Canceled)

	// Spans.
	byName := map[string]int{}
	var acquired sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		byName[s.Name()]++
		if s.Name() == "redfence.acquire" && acquired == nil {
			acquired = s
		}
	}
	assert.GreaterOrEqual(t, byName["redfence.acquire"], 4)
	assert.GreaterOrEqual(t, byName["redfence.fence"], 2, "fenced acquisitions have a fence span")
	assert.GreaterOrEqual(t, byName["redfence.extend"], 2)
	assert.GreaterOrEqual(t, byName["redfence.release"], 1)
	require.NotNil(t, acquired)
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range acquired.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	assert.Equal(t, key, attrs["redfence.key"].AsString())
	assert.GreaterOrEqual(t, attrs["redfence.votes_for"].AsInt64(), attrs["redfence.quorum"].AsInt64(), "votes at the decision")
	assert.Equal(t, int64(2), attrs["redfence.quorum"].AsInt64())
	assert.Equal(t, "acquired", attrs["redfence.outcome"].AsString())
	assert.Positive(t, attrs["redfence.token"].AsInt64())
	assert.Positive(t, attrs["redfence.validity_left_ms"].AsInt64())

	// Metrics.
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	outcomes := counts(t, rm, "redfence.acquisitions")
	assert.Equal(t, int64(2), outcomes["acquired"])
	assert.Equal(t, int64(1), outcomes["contended"])
	assert.Equal(t, int64(1), outcomes["unavailable"])
	assert.Equal(t, int64(1), outcomes["cancelled"])
	for name, want := range map[string]string{"redfence.acquisitions": "{attempt}", "redfence.acquire.duration": "s", "redfence.lock.wait": "s",
		"redfence.lease.hold": "s", "redfence.leases.lost": "{lease}", "redfence.node.errors": "{error}"} {
		unit, ok := metricUnit(rm, name)
		assert.True(t, ok, name)
		assert.Equal(t, want, unit, name)
	}

	// Logs: a warning for the lost lease.
	assert.Contains(t, logs.String(), "redfence: lease lost")
	assert.Contains(t, logs.String(), "redfence: acquire votes", "debug lines for votes")

}

// The logger gets a debug line for every retry of Lock.
func TestLoggerRetries(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, clients, redlock.WithTTL(time.Second), redlock.WithLogger(logger))
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	holder, err := m.TryLock(ctx)
	require.NoError(t, err)
	lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = m.Lock(lctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, holder.Release(ctx))
	assert.Contains(t, logs.String(), "redfence: lock attempt failed, retrying")
	assert.Contains(t, logs.String(), "attempt=1")
}

// With no provider given, the global ones as set when New runs are used: an
// SDK installed before New gets the spans and metrics; a Client made while
// the globals were unset records nothing (it makes no telemetry calls).
func TestGlobalProvidersAsSetAtNew(t *testing.T) {
	ctx := context.Background()
	clients := redistest.Clients(t, redistest.Nodes(t, 1))
	before, err := redlock.New(clients, redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer before.Close()

	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	oldTP, oldMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetTracerProvider(oldTP); otel.SetMeterProvider(oldMP) })

	cycle := func(c *redlock.Client) {
		m, err := c.NewMutex(redistest.Key(t))
		require.NoError(t, err)
		l, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	cycle(before)
	assert.Empty(t, spans.Ended(), "made before the SDK was installed: no spans")
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	assert.Empty(t, counts(t, rm, "redfence.acquisitions"), "made before the SDK was installed: no metrics")

	after, err := redlock.New(clients, redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer after.Close()
	cycle(after)
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	assert.ElementsMatch(t, []string{"redfence.acquire", "redfence.release"}, names)
	require.NoError(t, reader.Collect(ctx, &rm))
	assert.Equal(t, map[string]int64{"acquired": 1}, counts(t, rm, "redfence.acquisitions"))
}
