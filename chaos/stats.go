package chaos

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Stats summarises one Run.
type Stats struct {
	// Start and End delimit the run on the history's clock.
	Start, End time.Duration
	// Grants counts granted acquires; AcquireFailed those that definitely
	// failed; AcquireUnknown those that timed out or were cancelled.
	Grants, AcquireFailed, AcquireUnknown int
	// FencedAccepted and FencedRejected count fenced writes the guard
	// accepted and rejected as stale; FencedErrors those that failed
	// otherwise (an invalid token, a storage error).
	FencedAccepted, FencedRejected, FencedErrors int
	// ControlAttempts counts read-modify-writes of the control counter;
	// ControlIncrements those whose write succeeded (the increments
	// expected); ControlValue how much the counter actually grew.
	ControlAttempts, ControlIncrements int
	ControlValue                       int64
	// LostUpdates is ControlIncrements - ControlValue, at least 0.
	LostUpdates int
	// P50, P99 and Max are acquire latencies (Return - Call) over every
	// acquire that returned, granted or not (nearest-rank percentiles).
	P50, P99, Max time.Duration
	// Overran counts acquires that returned later than Call +
	// AcquireTimeout + Slack, or never.
	Overran int
	// GrantTimes are the Return times of granted acquires, sorted.
	GrantTimes []time.Duration
}

// computeStats computes the statistics of ops, the operations of a run from
// start to end on the history's clock, with the run's acquire timeout and
// slack (see Workload). It does not set the control counter's ControlValue
// and LostUpdates, which need the counter itself.
func computeStats(ops []Op, start, end, acquireTimeout, slack time.Duration) *Stats {
	st := &Stats{Start: start, End: end}
	var lat []time.Duration
	for _, op := range ops {
		switch op.Kind {
		case Acquire:
			switch op.Status {
			case OK:
				st.Grants++
				st.GrantTimes = append(st.GrantTimes, op.Return)
			case Fail:
				st.AcquireFailed++
			default:
				st.AcquireUnknown++
			}
			if op.Return == Inf {
				st.Overran++
				continue
			}
			lat = append(lat, op.Return-op.Call)
			if op.Return-op.Call > acquireTimeout+slack {
				st.Overran++
			}
		case FencedWrite:
			switch {
			case op.Status == OK:
				st.FencedAccepted++
			case op.Status == Fail && op.Note == NoteStale:
				st.FencedRejected++
			default:
				st.FencedErrors++
			}
		case UnfencedWrite:
			st.ControlAttempts++
			if op.Status == OK {
				st.ControlIncrements++
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(st.GrantTimes)
	st.P50 = percentile(lat, 50)
	st.P99 = percentile(lat, 99)
	if len(lat) > 0 {
		st.Max = lat[len(lat)-1]
	}
	return st
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns 0 for an empty slice; p is clamped to (0, 100].
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// Availability returns the fraction of the run's windows of length window,
// from Start, that saw at least one grant (an acquire returning granted in
// the window). Only whole windows count, unless the run is shorter than one
// window, which then counts as one. It returns 0 for a window <= 0.
func (s *Stats) Availability(window time.Duration) float64 {
	if s == nil || window <= 0 {
		return 0
	}
	n := int((s.End - s.Start) / window)
	if n < 1 {
		n = 1
	}
	seen := make([]bool, n)
	count := 0
	for _, t := range s.GrantTimes {
		if t < s.Start {
			continue
		}
		k := int((t - s.Start) / window)
		if k >= n || seen[k] {
			continue
		}
		seen[k] = true
		count++
	}
	return float64(count) / float64(n)
}

// RecoveryAfter returns the time from heal (on the history's clock) to the
// first grant at or after it, and false if no grant followed.
func (s *Stats) RecoveryAfter(heal time.Duration) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	i := sort.Search(len(s.GrantTimes), func(i int) bool { return s.GrantTimes[i] >= heal })
	if i == len(s.GrantTimes) {
		return 0, false
	}
	return s.GrantTimes[i] - heal, true
}
