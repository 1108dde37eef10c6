package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo with -metrics-addr serves the lock's OpenTelemetry metrics in
// Prometheus format while it runs: a scrape sees redfence's acquisitions.
func TestDemoServesPrometheusMetrics(t *testing.T) {
	bin := testRedisServer(t)
	cfg, err := parseDemoFlags([]string{"-duration", "1500ms", "-workers", "2", "-metrics-addr", "127.0.0.1:0"}, io.Discard)
	require.NoError(t, err)
	addrs := make(chan string, 1)
	cfg.onMetrics = func(a string) { addrs <- a }
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, err := runDemo(t.Context(), cfg, bin, io.Discard)
		done <- result{err}
	}()
	addr := <-addrs
	var body string
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false
		}
		body = string(b)
		return strings.Contains(body, `redfence_acquisitions_total{`) && strings.Contains(body, `outcome="acquired"`)
	}, 10*time.Second, 50*time.Millisecond, "metrics endpoint shows acquisitions")
	assert.Contains(t, body, "redfence_acquire_duration_seconds_bucket")
	require.NoError(t, (<-done).err)
	waitPoolProbesEnded(t, 3*time.Second)
	_, err = http.Get("http://" + addr + "/metrics") //nolint:noctx // only checks that the server is gone
	assert.Error(t, err, "the metrics server stops with the demo")
}
