package chaos

import (
	"math"
	"math/bits"
	"time"
)

// latencyHist counts durations in buckets of at most 1/128 of their value
// (exact below 256µs), so that a soak's acquire percentiles take fixed
// memory whatever its length.
type latencyHist struct {
	counts [histBuckets]int64
	n      int64
}

const (
	histSub     = 128 // buckets per power of two above 256µs
	histBuckets = 256 + 56*histSub
)

// histIndex returns the bucket of us microseconds (us >= 0).
func histIndex(us uint64) int {
	if us < 256 {
		return int(us)
	}
	e := bits.Len64(us) - 8 // us>>e is in [128, 256)
	return 256 + (e-1)*histSub + int(us>>e) - histSub
}

// histValue returns the middle of bucket i, in microseconds.
func histValue(i int) uint64 {
	if i < 256 {
		return uint64(i)
	}
	e := (i-256)/histSub + 1
	m := uint64((i-256)%histSub + histSub)
	return m<<e + (uint64(1)<<e)/2
}

func (h *latencyHist) add(d time.Duration) {
	h.counts[histIndex(uint64(max(d, 0)/time.Microsecond))]++
	h.n++
}

// percentile is the package's percentile (nearest rank) over the counted durations, to
// within a bucket: 1µs below 256µs, then 1/128 of the value.
func (h *latencyHist) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(max(1, min(h.n, int64(math.Ceil(p/100*float64(h.n))))))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return time.Duration(histValue(i)) * time.Microsecond
		}
	}
	return 0 // unreachable: the counts sum to n
}

// soakStats is computeStats and Stats.Availability, streamed: counts, the
// acquire latency histogram, and one bit per availability window (about
// 2 KiB for 30 minutes of 100ms windows).
type soakStats struct {
	start, window time.Duration
	acquireLimit  time.Duration // AcquireTimeout + slack: longer is an overrun

	ops, grants, overran, controlIncrements int
	latency                                 latencyHist
	granted                                 []uint64 // bit k: a grant returned in window k
}

func (s *soakStats) feed(op Op) {
	s.ops++
	switch op.Kind {
	case Acquire:
		if op.Status == OK {
			s.grants++
			if op.Return >= s.start {
				k := int((op.Return - s.start) / s.window)
				for len(s.granted) <= k/64 {
					s.granted = append(s.granted, 0)
				}
				s.granted[k/64] |= 1 << (k % 64)
			}
		}
		if op.Return == Inf {
			s.overran++
			return
		}
		s.latency.add(op.Return - op.Call)
		if op.Return-op.Call > s.acquireLimit {
			s.overran++
		}
	case UnfencedWrite:
		if op.Status == OK {
			s.controlIncrements++
		}
	}
}

// availability is Stats.Availability for a run that ended at end.
func (s *soakStats) availability(end time.Duration) float64 {
	if s.window <= 0 {
		return 0
	}
	n := max(int((end-s.start)/s.window), 1)
	count := 0
	for k := range n {
		if k/64 < len(s.granted) && s.granted[k/64]&(1<<(k%64)) != 0 {
			count++
		}
	}
	return float64(count) / float64(n)
}
