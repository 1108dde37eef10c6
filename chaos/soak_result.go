package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anishathalye/porcupine"
)

// Limits of the soak's resource checks.
const (
	// soakGoroutineSlack is how many goroutines the floor of a soak's last
	// half may exceed its first half's by (or half of it, if more): the
	// proxies hold a few goroutines per connection, and blackholed
	// connections linger until the clients give up on them.
	soakGoroutineSlack = 50
	// soakHeapSlackBytes and soakHeapSlackShare bound the live heap's growth:
	// the floor of a soak's last half may exceed its first half's by the
	// larger of the two (see heapGrowth and docs/soak.md for the
	// measurements they come from).
	soakHeapSlackBytes = 8 << 20
	soakHeapSlackShare = 0.5
	// soakRedisGrowth is how much any node's used_memory may grow from its
	// first sample: the fence and the lock key are a few keys, whatever the
	// run's length.
	soakRedisGrowth = 8 << 20
	// soakArtifactWindows is how many failing windows' timelines a run saves.
	soakArtifactWindows = 3
)

// SoakResult is what a Soak measured and found.
type SoakResult struct {
	Lock, Backend string
	// Sentinel: single over Sentinel (SoakOptions.Sentinel).
	Sentinel bool
	Unsafe   bool
	Seed     int64
	Duration time.Duration
	// Ops counts operations in the history; Grants granted acquires.
	Ops, Grants int
	// Faults counts the faults started, by kind; PeakDisturbed is the most
	// nodes disturbed at once.
	Faults        map[string]int
	PeakDisturbed int
	// Promotions counts the changes of primary on Sentinel: the failovers
	// the nemesis asked for and those Sentinel made on its own after a
	// kill or a pause of the primary.
	Promotions int
	// DoubleGrants is len(Overlaps); FencedViolations len(FencedViolations);
	// TokenProblems counts repeated tokens and tokens not above an earlier
	// acquire's (TokenExample describes the first).
	DoubleGrants, FencedViolations, TokenProblems int
	TokenExample                                  string
	// Windows is how many windows of Window the mutex model was checked
	// over, WindowViolations and WindowTimeouts their verdicts.
	Window                                    time.Duration
	Windows, WindowViolations, WindowTimeouts int
	// KeysLeft counts lock keys left a TTL after the run; LostUpdates the
	// unfenced control's lost increments; Overran acquires past their
	// deadline (both reported, not checked).
	KeysLeft, LostUpdates, Overran int
	// P50 and P99 are acquire latencies; Availability the share of 100ms
	// windows with a grant.
	P50, P99     time.Duration
	Availability float64
	// Goroutines and Heap (the live heap, as of the last GC): the floor of
	// the first and the last half of the samples after a warm-up quarter;
	// HeapMax the largest live heap, HeapInuseMax the largest HeapInuse
	// (live and not yet swept); RedisGrowth the most any node's used_memory
	// grew from its first sample, RedisPeak the largest.
	GoroutinesFirst, GoroutinesLast int
	HeapFirst, HeapLast, HeapMax    uint64
	HeapInuseMax                    uint64
	RedisGrowth, RedisPeak          int64
	Samples                         int
	// Fails lists the checks that failed; Pass is len(Fails) == 0.
	Fails []string
	Pass  bool
	// Artifacts is where the run's history and timelines were saved, if
	// it failed and SoakOptions.ArtifactsDir was set.
	Artifacts string

	failingWindows [][]Op
}

// check fills the result from the checks run on the history
// (soakChecker), the nemesis and the samples, and checks it: in every run
// no fenced-resource violation, unique tokens increasing in real-time
// order, no lock key left after its TTL, goroutines and live heap flat,
// Redis memory bounded, at least one grant; in safe runs also no double
// grant, no window the mutex model rejects, and no more nodes disturbed
// than the policy allows.
func (res *SoakResult) check(r *run, nem *nemesis, sent *soakSentinel, chk *soakChecker, smp []soakSample, opts SoakOptions) {
	st := &chk.stats
	final, _ := r.control.Get(context.Background()) // a memoryCounter fails only on a finished context
	res.Ops, res.Grants = st.ops, st.grants
	res.LostUpdates = max(0, st.controlIncrements-int(final))
	res.Overran, res.P50, res.P99 = st.overran, st.latency.percentile(50), st.latency.percentile(99)
	res.Availability = st.availability(r.end)
	res.Faults, res.PeakDisturbed = nem.faultCounts()
	if sent != nil {
		res.Promotions = int(sent.promotions.Load())
	}
	res.DoubleGrants = chk.overlaps.count
	res.FencedViolations = chk.fenced.count
	res.TokenProblems, res.TokenExample = chk.tokens.dups+chk.tokens.regr, chk.tokens.example
	res.Windows, res.WindowViolations, res.WindowTimeouts = chk.windows.checked, chk.windows.violations, chk.windows.timeouts
	res.failingWindows = chk.windows.failing
	res.KeysLeft = r.keysLeft
	res.Samples = len(smp)
	for _, s := range smp {
		res.HeapMax = max(res.HeapMax, s.heap)
		res.HeapInuseMax = max(res.HeapInuseMax, s.heapInuse)
	}
	res.RedisGrowth, res.RedisPeak = redisGrowth(smp)
	first, last, sampled := goroutineGrowth(smp)
	res.GoroutinesFirst, res.GoroutinesLast = first, last
	hFirst, hLast, _ := heapGrowth(smp)
	res.HeapFirst, res.HeapLast = hFirst, hLast

	want := func(ok bool, format string, args ...any) {
		if !ok {
			res.Fails = append(res.Fails, fmt.Sprintf(format, args...))
		}
	}
	want(res.Grants > 0, "no acquire was granted")
	if !res.Unsafe {
		want(res.DoubleGrants == 0, "%d double grants, want 0 (%s)", res.DoubleGrants, firstExample(chk.overlaps.examples()))
		want(res.WindowViolations == 0, "%d of %d windows violate the mutex model", res.WindowViolations, res.Windows)
		want(res.PeakDisturbed <= soakPolicy(res.Lock, res.Sentinel, nem.nodes, false).maxDisturbed,
			"%d nodes disturbed at once", res.PeakDisturbed)
	}
	want(res.FencedViolations == 0, "%d fenced-resource violations, want 0 (%s)", res.FencedViolations, firstExample(chk.fenced.examples))
	want(res.TokenProblems == 0, "tokens: %d problems (%s)", res.TokenProblems, res.TokenExample)
	want(res.KeysLeft == 0, "%d lock keys left after their TTL", res.KeysLeft)
	want(!sampled || last <= first+max(soakGoroutineSlack, first/2), "goroutines grew from %d to %d", first, last)
	want(!sampled || heapFlat(hFirst, hLast), "the live heap grew from %s to %s (limit %s)", mib(hFirst), mib(hLast), mib(heapLimit(hFirst)))
	want(res.RedisGrowth <= soakRedisGrowth, "a node's used_memory grew by %d bytes (limit %d)", res.RedisGrowth, soakRedisGrowth)
	res.Pass = len(res.Fails) == 0
}

// firstExample describes the first of examples, if any.
func firstExample[T fmt.Stringer](examples []T) string {
	if len(examples) == 0 {
		return "none kept"
	}
	return "first: " + examples[0].String()
}

// heapLimit is the largest floor of the live heap's last half allowed for
// a first half's floor of first.
func heapLimit(first uint64) uint64 {
	return first + max(soakHeapSlackBytes, uint64(soakHeapSlackShare*float64(first)))
}

// heapFlat is the heap verdict: the live heap's floor over the last half
// of the samples stayed within heapLimit of the first half's.
func heapFlat(first, last uint64) bool { return last <= heapLimit(first) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// writeArtifacts moves the history file, written as the run went, to
// history.json in res.Artifacts, and saves the porcupine timelines of the
// first failing windows (window-N.html) and summary.txt (the seed, the
// table, every double grant and fenced-resource violation) there. It reads
// the history back for them: a failed run may take the memory.
func (res *SoakResult) writeArtifacts(file *historyFile, timeout time.Duration) error {
	if err := os.MkdirAll(res.Artifacts, 0o755); err != nil {
		return fmt.Errorf("chaos: artifacts: %w", err)
	}
	name := filepath.Join(res.Artifacts, "history.json")
	if err := file.keep(name); err != nil {
		return err
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("chaos: artifacts: %w", err)
	}
	h, err := ReadHistoryJSON(bufio.NewReader(f))
	f.Close()
	if err != nil {
		return fmt.Errorf("chaos: artifacts: reading %s back: %w", name, err)
	}
	ops := h.Ops()
	pm := mutexModel()
	for i, win := range res.failingWindows {
		_, info, err := checkLinearizable(MutexModel, win, timeout)
		if err != nil {
			return err
		}
		info.AddAnnotations(faultAnnotations(ops))
		name := filepath.Join(res.Artifacts, fmt.Sprintf("window-%d.html", i))
		if err := writeFile(name, func(w io.Writer) error { return porcupine.Visualize(pm, info, w) }); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(res.Artifacts, "summary.txt"), func(w io.Writer) error {
		fmt.Fprintf(w, "seed: %d\n\n", res.Seed)
		if err := WriteSoakTable(w, []SoakResult{*res}); err != nil {
			return err
		}
		for _, o := range Overlaps(ops) {
			fmt.Fprintf(w, "double grant: %s\n", o)
		}
		for _, v := range FencedViolations(ops) {
			fmt.Fprintf(w, "fenced: %s\n", v)
		}
		return nil
	})
}

// Mode returns "safe" or "unsafe".
func (res SoakResult) Mode() string { return verdictWord(res.Unsafe, "unsafe", "safe") }

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
			return fmt.Sprint(r.DoubleGrants) + verdictWord(r.Unsafe, " (allowed)", "")
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
			return mib(r.HeapFirst) + " / " + mib(r.HeapLast) + "; " + mib(r.HeapMax)
		}),
		row("heap in use (max)", func(r SoakResult) string { return mib(r.HeapInuseMax) }),
		row("redis used_memory (peak, most growth)", func(r SoakResult) string {
			return mib(uint64(r.RedisPeak)) + ", +" + mib(uint64(max(r.RedisGrowth, 0)))
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
