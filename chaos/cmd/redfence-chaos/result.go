package main

import "time"

// workerResult is what one worker did.
type workerResult struct {
	// Acquisitions counts successful Locks.
	Acquisitions int
	// Failures counts failed Locks and Releases by kind.
	Failures failureCounts
	// CounterErrors counts counter updates that failed inside a critical section.
	CounterErrors int
	// FirstOther is the first error counted as Other, to show what it was.
	FirstOther error
	latencies  []time.Duration // of successful Locks
	intervals  []interval      // critical sections, in order
}

// demoResult is the outcome of a demo run.
type demoResult struct {
	// Addrs holds the nodes' addresses, by index.
	Addrs []string
	// Quorum is how many nodes must agree.
	Quorum int
	// Workers holds each worker's counts, by worker index.
	Workers []workerResult
	// Acquisitions is the total number of successful Locks.
	Acquisitions int
	// Failures totals the workers' failures.
	Failures failureCounts
	// CounterErrors totals the workers' failed counter updates.
	CounterErrors int
	// Overlaps is the number of pairs of critical sections of different
	// workers that overlapped in time. Mutual exclusion means 0.
	Overlaps int
	// Counter is the final value of the counter on node 0.
	Counter int64
	// Latency summarises how long successful Locks took.
	Latency latencySummary
	// Killed reports whether the last node was killed; KilledNode, KilledAt
	// (from the start of the run) and KillErr describe the kill.
	Killed     bool
	KilledNode int
	KilledAt   time.Duration
	KillErr    error
	// BeforeKill and AfterKill split Acquisitions at KilledAt; with no kill
	// all are BeforeKill.
	BeforeKill, AfterKill int
	// Interrupted reports that the run was cancelled before its duration.
	Interrupted bool
}

// LostUpdates is how many counter increments are missing: acquisitions
// minus the counter. Mutual exclusion means 0.
func (r *demoResult) LostUpdates() int64 { return int64(r.Acquisitions) - r.Counter }

// ok reports whether the lock kept mutual exclusion: no overlapping holders
// and no lost updates.
func (r *demoResult) ok() bool { return r.Overlaps == 0 && r.LostUpdates() == 0 }

// aggregate fills in r's totals and checks from its workers' records. Call
// it once, after the workers have finished.
func (r *demoResult) aggregate() {
	var lat []time.Duration
	var ivs []interval
	for _, w := range r.Workers {
		r.Acquisitions += w.Acquisitions
		r.Failures = r.Failures.plus(w.Failures)
		r.CounterErrors += w.CounterErrors
		lat = append(lat, w.latencies...)
		ivs = append(ivs, w.intervals...)
	}
	r.Latency = summarize(lat)
	r.Overlaps = countOverlaps(ivs)
	if r.Killed {
		r.BeforeKill, r.AfterKill = splitAt(ivs, r.KilledAt)
	} else {
		r.BeforeKill = len(ivs)
	}
}
