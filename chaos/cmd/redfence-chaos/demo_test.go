package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// e2eArgs is the demo's command line in the end-to-end tests.
var e2eArgs = []string{"-duration", "1500ms", "-workers", "3"}

// testRedisServer returns the redis-server to use, failing the test with
// what to install when there is none. Tests never install packages.
func testRedisServer(t *testing.T) string {
	t.Helper()
	f := systemRedisFinder()
	f.install = func(context.Context, io.Writer, io.Writer) error {
		return errors.New("tests do not install packages; run scripts/ensure-redis.sh")
	}
	f.isRoot = func() bool { return false }
	bin, err := f.find(t.Context(), "", io.Discard, io.Discard)
	require.NoError(t, err)
	return bin
}

// waitPoolProbesEnded waits until go-redis's dial probe goroutines, which a
// pool starts after repeated dial failures (here: to the killed node) and
// which notice that their pool is closed only after up to a second of sleep,
// have ended. It fails the test if they are still there after timeout.
func waitPoolProbesEnded(t *testing.T, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "pool.(*ConnPool).tryDial") {
			t.Logf("go-redis dial probes ended %v after the demo returned", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("go-redis dial probes still running %v after the demo closed its clients:\n%s", timeout, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDemoEndToEnd(t *testing.T) {
	bin := testRedisServer(t)
	cfg, err := parseDemoFlags(e2eArgs, io.Discard)
	require.NoError(t, err)

	var out, redisLog bytes.Buffer
	redis.SetLogger(newDedupLogger(&redisLog)) // as the command does
	t.Cleanup(logging.Enable)
	start := time.Now()
	res, err := runDemo(t.Context(), cfg, bin, &out)
	require.NoError(t, err, "output:\n%s", out.String())
	t.Logf("demo took %v; output:\n%s\ngo-redis log:\n%s", time.Since(start), out.String(), redisLog.String())
	waitPoolProbesEnded(t, 3*time.Second)

	assert.False(t, res.Interrupted)
	assert.Len(t, res.Addrs, 5)
	assert.Equal(t, 3, res.Quorum)
	require.Len(t, res.Workers, 3)
	assert.Positive(t, res.Acquisitions)
	assert.Zero(t, res.Overlaps, "overlapping holders")
	assert.Equal(t, int64(res.Acquisitions), res.Counter, "counter vs acquisitions")
	assert.Zero(t, res.LostUpdates())
	assert.Zero(t, res.CounterErrors)
	assert.Zero(t, res.Failures.Lost, "no critical section should outlive a 2s lease")
	assert.True(t, res.ok())

	require.True(t, res.Killed, "kill error: %v", res.KillErr)
	assert.Equal(t, 4, res.KilledNode)
	assert.InDelta(t, float64(500*time.Millisecond), float64(res.KilledAt), float64(300*time.Millisecond))
	assert.Positive(t, res.AfterKill, "acquisitions after the kill")
	assert.Equal(t, res.Acquisitions, res.BeforeKill+res.AfterKill)

	assert.Positive(t, res.Latency.Max)
	assert.LessOrEqual(t, res.Latency.P50, res.Latency.P99)
	assert.LessOrEqual(t, res.Latency.P99, res.Latency.Max)
	assert.Contains(t, out.String(), "killed node 4 ("+res.Addrs[4]+") at ")
}

func TestDemoCommandEndToEnd(t *testing.T) {
	testRedisServer(t)
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"demo"}, e2eArgs...), &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	waitPoolProbesEnded(t, 3*time.Second)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout.String(), "\noverlapping holders: 0 (none expected)\n")
	assert.Contains(t, stdout.String(), "\nPASS: mutual exclusion held: ")
}

// TestDemoInterrupted checks that a cancelled run stops early, reports a
// partial result and leaves nothing running (the goleak check in TestMain
// covers goroutines; the nodes' processes are closed by runDemo).
func TestDemoInterrupted(t *testing.T) {
	bin := testRedisServer(t)
	cfg, err := parseDemoFlags([]string{"-duration", "1m", "-workers", "2"}, io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := runDemo(ctx, cfg, bin, io.Discard)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the run must stop soon after cancellation")
	assert.True(t, res.Interrupted)
	assert.False(t, res.Killed, "the kill was due after 20s")
	assert.True(t, res.ok())
	waitPoolProbesEnded(t, 3*time.Second)
}
