package fencing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/fencing"
)

// checksByResult reads MetricChecks back, keyed by "guard/result".
func checksByResult(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != fencing.MetricChecks {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok)
			for _, dp := range sum.DataPoints {
				g, _ := dp.Attributes.Value(attribute.Key("guard"))
				r, _ := dp.Attributes.Value(attribute.Key("result"))
				out[g.AsString()+"/"+r.AsString()] += dp.Value
			}
		}
	}
	return out
}

// Every guard counts its checks by result; stale ones are the fenced writes
// it rejected.
func TestGuardMetrics(t *testing.T) {
	ctx := testCtx(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	rg := fencing.NewRedisGuard(redisClient(t), fencing.WithRedisMeterProvider(mp))
	sg, _ := sqlGuard(t, fencing.WithSQLMeterProvider(mp))
	for _, g := range []fencing.Guard{rg, sg} {
		require.NoError(t, g.Check(ctx, "r", 5))
		require.NoError(t, g.Check(ctx, "r", 5))
		require.ErrorIs(t, g.Check(ctx, "r", 4), fencing.ErrStaleToken)
		require.Error(t, g.Check(ctx, "r", 0))
	}
	require.NoError(t, rg.Write(ctx, "w", 2, rg.DataKey("w", "data"), "x", 0))
	require.ErrorIs(t, rg.Write(ctx, "w", 1, rg.DataKey("w", "data"), "y", 0), fencing.ErrStaleToken)

	got := checksByResult(t, reader)
	assert.Equal(t, int64(3), got["redis/accepted"], "two Checks and one Write")
	assert.Equal(t, int64(2), got["redis/stale"], "a stale Check and a stale Write")
	assert.Equal(t, int64(1), got["redis/invalid"])
	assert.Equal(t, int64(2), got["sql/accepted"])
	assert.Equal(t, int64(1), got["sql/stale"])
	assert.Equal(t, int64(1), got["sql/invalid"])
}
