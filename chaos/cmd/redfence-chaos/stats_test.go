package main

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/redlock"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestCountOverlaps(t *testing.T) {
	iv := func(w, start, end int) interval { return interval{worker: w, start: ms(start), end: ms(end)} }
	tests := []struct {
		name string
		ivs  []interval
		want int
	}{
		{"none", nil, 0},
		{"one", []interval{iv(0, 0, 10)}, 0},
		{"disjoint", []interval{iv(0, 0, 10), iv(1, 20, 30), iv(2, 40, 50)}, 0},
		{"touching ends do not overlap", []interval{iv(0, 0, 10), iv(1, 10, 20), iv(0, 20, 30)}, 0},
		{"simple overlap", []interval{iv(0, 0, 10), iv(1, 5, 15)}, 1},
		{"unsorted input", []interval{iv(1, 5, 15), iv(2, 40, 50), iv(0, 0, 10)}, 1},
		{"containment", []interval{iv(0, 0, 100), iv(1, 10, 20), iv(2, 30, 40)}, 2},
		{"three at once", []interval{iv(0, 0, 10), iv(1, 1, 10), iv(2, 2, 10)}, 3},
		{"same start", []interval{iv(0, 5, 10), iv(1, 5, 6)}, 1},
		{"empty interval overlaps nothing", []interval{iv(0, 0, 10), iv(1, 5, 5)}, 0},
		{"same worker is not counted", []interval{iv(0, 0, 10), iv(0, 5, 15)}, 0},
		{"chain", []interval{iv(0, 0, 10), iv(1, 9, 20), iv(2, 19, 30)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]interval(nil), tt.ivs...)
			assert.Equal(t, tt.want, countOverlaps(tt.ivs))
			assert.Equal(t, in, tt.ivs, "input must not be modified")
		})
	}
}

// TestCountOverlapsMatchesBruteForce checks the sweep against comparing
// every pair on a deterministic pseudo-random input.
func TestCountOverlapsMatchesBruteForce(t *testing.T) {
	var ivs []interval
	x := uint32(12345)
	next := func(n uint32) int { x = x*1664525 + 1013904223; return int((x >> 8) % n) }
	for i := 0; i < 300; i++ {
		start := next(1000)
		ivs = append(ivs, interval{worker: next(5), start: ms(start), end: ms(start + next(20))})
	}
	brute := 0
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.worker != b.worker && a.start < a.end && b.start < b.end && a.start < b.end && b.start < a.end {
				brute++
			}
		}
	}
	assert.Equal(t, brute, countOverlaps(ivs))
}

func TestSplitAt(t *testing.T) {
	ivs := []interval{{start: ms(1)}, {start: ms(5)}, {start: ms(10)}, {start: ms(11)}}
	tests := []struct {
		at            time.Duration
		before, after int
	}{
		{0, 0, 4},
		{ms(5), 1, 3},
		{ms(10), 2, 2},
		{ms(100), 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.at.String(), func(t *testing.T) {
			b, a := splitAt(ivs, tt.at)
			assert.Equal(t, tt.before, b)
			assert.Equal(t, tt.after, a)
		})
	}
}

func TestPercentile(t *testing.T) {
	ten := []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8), ms(9), ms(10)}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{ms(7)}, 50, ms(7)},
		{[]time.Duration{ms(7)}, 99, ms(7)},
		{ten, 50, ms(5)},
		{ten, 99, ms(10)},
		{ten, 100, ms(10)},
		{ten, 10, ms(1)},
		{ten, 11, ms(2)},
		{hundred, 50, ms(50)},
		{hundred, 99, ms(99)},
		{ten, 0, ms(1)},
		{ten, -5, ms(1)},
		{ten, 150, ms(10)},
		{ten, math.NaN(), ms(1)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d/p=%v", len(tt.sorted), tt.p), func(t *testing.T) {
			assert.Equal(t, tt.want, percentile(tt.sorted, tt.p))
		})
	}
}

func TestSummarize(t *testing.T) {
	assert.Equal(t, latencySummary{}, summarize(nil))
	in := []time.Duration{ms(9), ms(1), ms(5), ms(3), ms(7)}
	assert.Equal(t, latencySummary{P50: ms(5), P99: ms(9), Max: ms(9)}, summarize(in))
	assert.Equal(t, []time.Duration{ms(9), ms(1), ms(5), ms(3), ms(7)}, in, "input must not be modified")
}

func TestFailureCounts(t *testing.T) {
	var f failureCounts
	for _, err := range []error{
		nil,
		fmt.Errorf("%w: quorum", redlock.ErrNotAcquired),
		redlock.ErrNotAcquired,
		fmt.Errorf("%w: validity ran out", redlock.ErrLost),
		redlock.ErrReleased,
		errors.New("boom"),
	} {
		f.add(err)
	}
	assert.Equal(t, failureCounts{NotAcquired: 2, Lost: 1, Other: 2}, f)
	assert.Equal(t, 5, f.total())
	assert.Equal(t, failureCounts{NotAcquired: 3, Lost: 1, Other: 2}, f.plus(failureCounts{NotAcquired: 1}))
}
