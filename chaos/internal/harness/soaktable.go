package harness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSoakTable writes results as a plain-text table, one column per run
// and one row per figure.
func WriteSoakTable(w io.Writer, results []SoakResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range soakRows(results) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("chaos: writing soak table: %w", err)
	}
	return nil
}

// WriteSoakMarkdown writes results as a Markdown table, one column per run.
func WriteSoakMarkdown(w io.Writer, results []SoakResult) error {
	var b strings.Builder
	for i, row := range soakRows(results) {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString(strings.Repeat("| --- ", len(row)) + "|\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func soakRows(results []SoakResult) [][]string {
	row := func(name string, f func(r SoakResult) string) []string {
		out := []string{name}
		for _, r := range results {
			out = append(out, f(r))
		}
		return out
	}
	return [][]string{
		row("run", func(r SoakResult) string { return r.Backend + " " + SoakConfig(r.Lock, r.Sentinel) + " " + r.Mode() }),
		row("duration, seed", func(r SoakResult) string { return fmt.Sprintf("%v, seed %d", r.Duration, r.Seed) }),
		row("operations", func(r SoakResult) string { return fmt.Sprint(r.Ops) }),
		row("grants", func(r SoakResult) string { return fmt.Sprint(r.Grants) }),
		row("faults", func(r SoakResult) string { return faultSummary(r.Faults) }),
		row("most nodes disturbed at once", func(r SoakResult) string { return fmt.Sprint(r.PeakDisturbed) }),
		row("Sentinel promotions (any cause)", func(r SoakResult) string {
			if !r.Sentinel {
				return "-"
			}
			return fmt.Sprint(r.Promotions)
		}),
		row("double grants", func(r SoakResult) string {
			if r.Unsafe {
				return fmt.Sprint(r.DoubleGrants) + " (allowed)"
			}
			return fmt.Sprint(r.DoubleGrants)
		}),
		row("fenced violations", func(r SoakResult) string { return fmt.Sprint(r.FencedViolations) }),
		row("token problems", func(r SoakResult) string { return fmt.Sprint(r.TokenProblems) }),
		row("mutex windows: checked / violations / timeouts", func(r SoakResult) string {
			return fmt.Sprintf("%d / %d / %d (%v each)", r.Windows, r.WindowViolations, r.WindowTimeouts, r.Window)
		}),
		row("keys left after TTL", func(r SoakResult) string { return fmt.Sprint(r.KeysLeft) }),
		row("lost updates (control)", func(r SoakResult) string { return fmt.Sprint(r.LostUpdates) }),
		row("acquire p50 / p99", func(r SoakResult) string {
			return fmt.Sprintf("%v / %v", r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
		}),
		row("acquires overran", func(r SoakResult) string { return fmt.Sprint(r.Overran) }),
		row("availability (100ms windows)", func(r SoakResult) string { return fmt.Sprintf("%.1f%%", 100*r.Availability) }),
		row("goroutines (floor, first / last half)", func(r SoakResult) string {
			if r.GoroutinesFirst == 0 {
				return fmt.Sprintf("n/a (%d samples)", r.Samples)
			}
			return fmt.Sprintf("%d / %d", r.GoroutinesFirst, r.GoroutinesLast)
		}),
		row("live heap (floor, first / last half; max)", func(r SoakResult) string {
			if r.HeapFirst == 0 {
				return fmt.Sprintf("n/a (%d samples)", r.Samples)
			}
			return MiB(r.HeapFirst) + " / " + MiB(r.HeapLast) + "; " + MiB(r.HeapMax)
		}),
		row("heap in use (max)", func(r SoakResult) string { return MiB(r.HeapInuseMax) }),
		row("redis used_memory (peak, most growth)", func(r SoakResult) string {
			return MiB(uint64(r.RedisPeak)) + ", +" + MiB(uint64(max(r.RedisGrowth, 0)))
		}),
		row("verdict", func(r SoakResult) string {
			switch {
			case r.Pass:
				return "PASS"
			case len(r.Fails) == 0:
				return "FAIL: the run could not be carried out (see its error)"
			}
			return "FAIL: " + strings.Join(r.Fails, "; ")
		}),
	}
}

// faultSummary formats fault counts by kind, in the nemesis's kind order.
func faultSummary(counts map[string]int) string {
	var parts []string
	for _, k := range SoakFaults {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// MiB formats b bytes in mebibytes ("1.5 MiB").
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
