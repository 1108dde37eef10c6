package main

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/redfence/redfence/redlock"
)

// interval is one critical section as its holder saw it: from the return of
// Lock to the call of Release, as offsets from the start of the run. It is
// half-open: a section that ends exactly when another starts does not overlap
// it.
type interval struct {
	worker     int
	start, end time.Duration
}

// countOverlaps returns the number of pairs of intervals, held by different
// workers, that overlap in time. It sorts a copy of ivs by start and sweeps,
// keeping the intervals still open at each start, so the count is exact.
func countOverlaps(ivs []interval) int {
	sorted := slices.Clone(ivs)
	slices.SortFunc(sorted, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	var open []interval
	pairs := 0
	for _, iv := range sorted {
		kept := open[:0]
		for _, o := range open {
			if o.end > iv.start { // still open when iv starts
				kept = append(kept, o)
				if o.worker != iv.worker && iv.end > iv.start { // an empty iv overlaps nothing
					pairs++
				}
			}
		}
		open = append(kept, iv)
	}
	return pairs
}

// splitAt counts the intervals that started before t and at or after t.
func splitAt(ivs []interval, t time.Duration) (before, after int) {
	for _, iv := range ivs {
		if iv.start < t {
			before++
		} else {
			after++
		}
	}
	return before, after
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted, an
// ascending slice, by the nearest-rank method: the smallest value that at
// least p percent of the values are less than or equal to. It returns 0 for
// an empty slice; p outside (0, 100] is clamped.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	if math.IsNaN(p) || rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// latencySummary is the distribution of acquire latencies.
type latencySummary struct {
	P50, P99, Max time.Duration
}

// summarize returns the p50, p99 and maximum of ds, which it does not modify.
func summarize(ds []time.Duration) latencySummary {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	var s latencySummary
	if len(sorted) > 0 {
		s = latencySummary{P50: percentile(sorted, 50), P99: percentile(sorted, 99), Max: sorted[len(sorted)-1]}
	}
	return s
}

// failureCounts counts failed lock operations by kind.
type failureCounts struct {
	// NotAcquired counts Lock calls that returned ErrNotAcquired.
	NotAcquired int
	// Lost counts Releases that found the lease already lost (ErrLost): the
	// critical section outlived the lease's validity.
	Lost int
	// Other counts any other error.
	Other int
}

// add counts err under its kind; a nil err is not counted.
func (f *failureCounts) add(err error) {
	switch {
	case err == nil:
	case errors.Is(err, redlock.ErrNotAcquired):
		f.NotAcquired++
	case errors.Is(err, redlock.ErrLost):
		f.Lost++
	default:
		f.Other++
	}
}

// plus returns the element-wise sum of f and g.
func (f failureCounts) plus(g failureCounts) failureCounts {
	return failureCounts{f.NotAcquired + g.NotAcquired, f.Lost + g.Lost, f.Other + g.Other}
}

// total returns the number of failures of every kind.
func (f failureCounts) total() int { return f.NotAcquired + f.Lost + f.Other }
