package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// writeReport prints the per-worker table, the checks and the verdict line.
func writeReport(w io.Writer, cfg demoConfig, r *demoResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tacquired\tnot acquired\tlost\tother errors\t")
	for i, wr := range r.Workers {
		f := wr.Failures
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t\n", i, wr.Acquisitions, f.NotAcquired, f.Lost, f.Other)
	}
	f := r.Failures
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t\n", r.Acquisitions, f.NotAcquired, f.Lost, f.Other)
	tw.Flush()
	for i, wr := range r.Workers {
		if wr.FirstOther != nil {
			fmt.Fprintf(w, "worker %d's first other error (a node timing out on a release, say; the key expires by TTL): %v\n", i, wr.FirstOther)
		}
	}
	fmt.Fprintln(w)

	if r.Overlaps == 0 {
		fmt.Fprintln(w, "overlapping holders: 0 (none expected)")
	} else {
		fmt.Fprintf(w, "overlapping holders: %d pairs of critical sections overlapped (none expected)\n", r.Overlaps)
	}
	fmt.Fprintf(w, "counter: %d after %d acquisitions (lost updates: %d, none expected)\n", r.Counter, r.Acquisitions, r.LostUpdates())
	if r.CounterErrors > 0 {
		fmt.Fprintf(w, "counter updates that failed with an error: %d\n", r.CounterErrors)
	}
	l := r.Latency
	fmt.Fprintf(w, "acquire latency (waiting for other holders included): p50 %v, p99 %v, max %v\n", roundDur(l.P50), roundDur(l.P99), roundDur(l.Max))
	switch {
	case r.Killed:
		fmt.Fprintf(w, "acquisitions: %d before the kill, %d after it (with %d of %d nodes up, quorum %d)\n",
			r.BeforeKill, r.AfterKill, len(r.Addrs)-1, len(r.Addrs), r.Quorum)
	case r.KillErr != nil:
		fmt.Fprintf(w, "acquisitions: %d (node %d could not be killed: %v)\n", r.Acquisitions, r.KilledNode, r.KillErr)
	default:
		fmt.Fprintf(w, "acquisitions: %d (the run ended before node %d was killed at %v)\n", r.Acquisitions, r.KilledNode, cfg.killAfter)
	}
	fmt.Fprintln(w, verdict(r))
}

// verdict returns the report's last line.
func verdict(r *demoResult) string {
	prefix := ""
	if r.Interrupted {
		prefix = "interrupted, partial results: "
	}
	if r.ok() {
		return prefix + fmt.Sprintf("PASS: mutual exclusion held: %d acquisitions, no overlapping holders, no lost updates", r.Acquisitions)
	}
	return prefix + fmt.Sprintf("FAIL: mutual exclusion broken: %d overlapping holder pairs, %d lost updates", r.Overlaps, r.LostUpdates())
}

// roundDur rounds d for display: to 10µs below 10ms, else to 100µs.
func roundDur(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}
