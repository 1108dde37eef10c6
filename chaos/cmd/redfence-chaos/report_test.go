package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func sampleResult() *demoResult {
	return &demoResult{
		Addrs:  []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"},
		Quorum: 3,
		Workers: []workerResult{
			{Acquisitions: 10, Failures: failureCounts{NotAcquired: 1}},
			{Acquisitions: 12, Failures: failureCounts{Lost: 2, Other: 3}},
		},
		Acquisitions: 22,
		Failures:     failureCounts{NotAcquired: 1, Lost: 2, Other: 3},
		Counter:      22,
		Latency:      latencySummary{P50: 1234567 * time.Nanosecond, P99: 45678901 * time.Nanosecond, Max: 50 * time.Millisecond},
		Killed:       true,
		KilledNode:   4,
		KilledAt:     2 * time.Second,
		BeforeKill:   7,
		AfterKill:    15,
	}
}

func TestWriteReport(t *testing.T) {
	var b bytes.Buffer
	writeReport(&b, demoConfig{killAfter: 2 * time.Second}, sampleResult())
	want := `
  worker  acquired  not acquired  lost  other errors
       0        10             1     0             0
       1        12             0     2             3
   total        22             1     2             3

overlapping holders: 0 (none expected)
counter: 22 after 22 acquisitions (lost updates: 0, none expected)
acquire latency (waiting for other holders included): p50 1.23ms, p99 45.7ms, max 50ms
acquisitions: 7 before the kill, 15 after it (with 4 of 5 nodes up, quorum 3)
PASS: mutual exclusion held: 22 acquisitions, no overlapping holders, no lost updates
`
	assert.Equal(t, want, b.String())
}

func TestWriteReportProblems(t *testing.T) {
	tests := []struct {
		name   string
		change func(*demoResult)
		want   []string
		ok     bool
	}{
		{"overlap", func(r *demoResult) { r.Overlaps = 2 }, []string{
			"overlapping holders: 2 pairs of critical sections overlapped (none expected)",
			"FAIL: mutual exclusion broken: 2 overlapping holder pairs, 0 lost updates",
		}, false},
		{"lost update", func(r *demoResult) { r.Counter = 20; r.CounterErrors = 1 }, []string{
			"counter: 20 after 22 acquisitions (lost updates: 2, none expected)",
			"counter updates that failed with an error: 1",
			"FAIL: mutual exclusion broken: 0 overlapping holder pairs, 2 lost updates",
		}, false},
		{"no kill yet", func(r *demoResult) { r.Killed = false }, []string{
			"acquisitions: 22 (the run ended before node 4 was killed at 2s)",
		}, true},
		{"kill failed", func(r *demoResult) { r.Killed, r.KillErr = false, errors.New("nope") }, []string{
			"acquisitions: 22 (node 4 could not be killed: nope)",
		}, true},
		{"interrupted", func(r *demoResult) { r.Interrupted = true }, []string{
			"interrupted, partial results: PASS:",
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleResult()
			tt.change(r)
			var b bytes.Buffer
			writeReport(&b, demoConfig{killAfter: 2 * time.Second}, r)
			for _, w := range tt.want {
				assert.Contains(t, b.String(), w)
			}
			assert.Equal(t, tt.ok, r.ok())
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			assert.Equal(t, verdict(r), lines[len(lines)-1], "the verdict is the last line")
		})
	}
}

func TestRoundDur(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, 0},
		{123456 * time.Nanosecond, 120 * time.Microsecond},
		{9999999 * time.Nanosecond, 10 * time.Millisecond},
		{12345678 * time.Nanosecond, 12300 * time.Microsecond},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, roundDur(tt.in), tt.in.String())
	}
}

func TestAggregate(t *testing.T) {
	r := &demoResult{
		Killed:   true,
		KilledAt: ms(100),
		Counter:  4,
		Workers: []workerResult{
			{Acquisitions: 2, Failures: failureCounts{NotAcquired: 1}, latencies: []time.Duration{ms(1), ms(3)},
				intervals: []interval{{0, ms(10), ms(20)}, {0, ms(150), ms(160)}}},
			{Acquisitions: 2, Failures: failureCounts{Lost: 1}, CounterErrors: 1, latencies: []time.Duration{ms(2), ms(4)},
				intervals: []interval{{1, ms(20), ms(30)}, {1, ms(155), ms(170)}}},
		},
	}
	r.aggregate()
	assert.Equal(t, 4, r.Acquisitions)
	assert.Equal(t, failureCounts{NotAcquired: 1, Lost: 1}, r.Failures)
	assert.Equal(t, 1, r.CounterErrors)
	assert.Equal(t, latencySummary{P50: ms(2), P99: ms(4), Max: ms(4)}, r.Latency)
	assert.Equal(t, 1, r.Overlaps)
	assert.Equal(t, 2, r.BeforeKill)
	assert.Equal(t, 2, r.AfterKill)
	assert.False(t, r.ok(), "one overlap")
}
