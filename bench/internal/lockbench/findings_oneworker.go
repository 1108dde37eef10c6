package lockbench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// oneWorkerCols are the libraries the one-worker finding compares: each
// redfence lock beside the peer it is measured against.
var oneWorkerCols = []struct{ sid, name, label string }{
	{"s1", NameRFRedlockQ0, "redfence redlock, quarantine off"},
	{"s1", NameRedsync5, "redsync, 5 pools"},
	{"s2", NameRFSingle, "redfence single"},
	{"s2", NameBSM, "bsm/redislock"},
}

// oneWorkerFindings explains the one-worker p50 ratios from this run's own
// measurements: the CPU a cycle cost each side, and where the client's
// went by the run's CPU profile (profile.go).
func (r *Report) oneWorkerFindings(b *strings.Builder) {
	rows := make([]Row, len(oneWorkerCols))
	for i, c := range oneWorkerCols {
		row, ok := r.rowOf(c.sid, c.name, 1)
		if !ok {
			return
		}
		rows[i] = row
	}
	b.WriteString("\n### One worker: p50 against redsync and bsm/redislock\n\n")
	b.WriteString("At one worker a cycle is its round trips (to acquire, one request to each node, sent in parallel; to release, the same) " +
		"plus the CPU on their path, the client's and the nodes'. Both libraries of a pair make the same round trips, so what sets their p50s apart is the CPU on that path and the waits for a core (both sides share the machine's cores). " +
		"The table gives, per cycle, this run's p50 and CPU (the throughput tables' columns), the goroutines the process started, " +
		"and where the client's CPU went by a CPU profile of the process taken during every one-worker round of this run " +
		"(`runtime/pprof`, samples sorted by their stacks: the runtime's own work wherever it was entered from, then a system call at the leaf, then the innermost frame of a non-standard package; " +
		"the harness is included, alike for every library; a profile samples at 100 Hz and sees a little less than getrusage):\n\n")
	b.WriteString("| per cycle |")
	for _, c := range oneWorkerCols {
		b.WriteString(" " + c.label + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(rows)) + "\n")
	line := func(label string, f func(Row) string) {
		b.WriteString("| " + label + " |")
		for _, row := range rows {
			b.WriteString(" " + f(row) + " |")
		}
		b.WriteString("\n")
	}
	ns := func(m string) func(Row) string {
		return func(row Row) string {
			if v, ok := row.M[m]; ok {
				return fmtNs(v)
			}
			return "-"
		}
	}
	line("p50", ns(mP50))
	line("client CPU (getrusage)", ns(mCliCPU))
	line("nodes' CPU (`INFO cpu`)", ns(mSrvCPU))
	line("nodes: commands run, scripts' calls included (`INFO stats`)", func(row Row) string { return fmt.Sprintf("%.1f", row.M[mCmds]) })
	line("nodes: bytes read", func(row Row) string { return fmt.Sprintf("%.0f", row.M[mInBytes]) })
	profiled := true
	for _, row := range rows {
		_, ok := row.M[mGoroutines]
		profiled = profiled && ok
	}
	if profiled {
		line("goroutines started", func(row Row) string { return fmt.Sprintf("%.1f", row.M[mGoroutines]) })
		for _, k := range cpuKinds {
			line("client: "+k.label, func(row Row) string { return fmtNs(row.M[k.key]) })
		}
		line("client: all the profile saw", func(row Row) string {
			var sum float64
			for _, k := range cpuKinds {
				sum += row.M[k.key]
			}
			return fmtNs(sum)
		})
	}
	b.WriteString("\n")
	for _, p := range [][2]int{{0, 1}, {2, 3}} {
		oneWorkerPair(b, oneWorkerCols[p[0]].label, oneWorkerCols[p[1]].label, rows[p[0]], rows[p[1]], profiled)
	}
	b.WriteString("On the nodes, redfence's release with nobody queued is a compare-and-delete with one more call, the queue's `ZCARD` (release_fast.lua), and its arguments carry the queue's key and the grant channel's prefix. ")
	if !profiled {
		b.WriteString("(No CPU profile in this run: another profile of the process was running.) ")
	}
	if def, q0, ok := r.rowPair("s1", 1, NameRFRedlockDefault, NameRFRedlockQ0, mP50); ok {
		fmt.Fprintf(b, "With its defaults the acquire on a proven connection is `SET NX` with the restart proof's two readings in the same pipeline: in this run the p50 is %s against %s with the quarantine off (%.2fx), "+
			"and the nodes spent %s per cycle against %s.", fmtNs(def.M[mP50]), fmtNs(q0.M[mP50]), def.M[mP50]/q0.M[mP50], fmtNs(def.M[mSrvCPU]), fmtNs(q0.M[mSrvCPU]))
	}
	b.WriteString("\n")
}

// oneWorkerPair compares a redfence row with its peer's: the p50 and CPU
// differences, and the kinds of client work that differ most.
func oneWorkerPair(b *strings.Builder, name, peer string, a, p Row, profiled bool) {
	fmt.Fprintf(b, "%s against %s: p50 %s against %s (%.2fx, %s); per cycle the client spent %s and the nodes %s, running %.1f commands against %.1f and reading %.0f bytes against %.0f",
		name, peer, fmtNs(a.M[mP50]), fmtNs(p.M[mP50]), ratioOf(a.M[mP50], p.M[mP50]), signedNs(a.M[mP50]-p.M[mP50]),
		signedNs(a.M[mCliCPU]-p.M[mCliCPU]), signedNs(a.M[mSrvCPU]-p.M[mSrvCPU]), a.M[mCmds], p.M[mCmds], a.M[mInBytes], p.M[mInBytes])
	if !profiled {
		b.WriteString(". ")
		return
	}
	type diff struct {
		label string
		d     float64
	}
	var ds []diff
	for _, k := range cpuKinds {
		ds = append(ds, diff{k.label, a.M[k.key] - p.M[k.key]})
	}
	slices.SortFunc(ds, func(x, y diff) int { return cmp.Compare(math.Abs(y.d), math.Abs(x.d)) })
	fmt.Fprintf(b, "; of the client's CPU, the kinds that differ most are %s (%s) and %s (%s), and the library's own code cost %s against %s. ",
		ds[0].label, signedNs(ds[0].d), ds[1].label, signedNs(ds[1].d), fmtNs(a.M["prof lib"]), fmtNs(p.M["prof lib"]))
}

// signedNs formats a difference in nanoseconds with its sign.
func signedNs(v float64) string {
	if v < 0 {
		return "-" + fmtNs(-v)
	}
	return "+" + fmtNs(v)
}

func ratioOf(num, den float64) float64 {
	if den == 0 {
		return math.NaN()
	}
	return num / den
}
