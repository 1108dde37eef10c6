package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/chaos/internal/harness"
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

// checkSoak fills res from the checks run on the history
// (soakChecker), the nemesis and the samples, and checks it: in every run
// no fenced-resource violation, unique tokens increasing in real-time
// order, no lock key left after its TTL, goroutines and live heap flat,
// Redis memory bounded, at least one grant; in safe runs also no double
// grant, no window the mutex model rejects, and no more nodes disturbed
// than the policy allows.
func checkSoak(res *harness.SoakResult, r *run, nem *nemesis, sent *soakSentinel, chk *soakChecker, smp []soakSample) {
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
	want(!sampled || heapFlat(hFirst, hLast), "the live heap grew from %s to %s (limit %s)", harness.MiB(hFirst), harness.MiB(hLast), harness.MiB(heapLimit(hFirst)))
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

// writeSoakArtifacts moves the history file, written as the run went, to
// history.json in res.Artifacts, and saves the porcupine timelines of the
// first failing windows (window-N.html) and summary.txt (the seed, the
// table, every double grant and fenced-resource violation) there. It reads
// the history back for them: a failed run may take the memory.
func writeSoakArtifacts(res *harness.SoakResult, failing [][]Op, file *historyFile, timeout time.Duration) error {
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
	for i, win := range failing {
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
		if err := harness.WriteSoakTable(w, []harness.SoakResult{*res}); err != nil {
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
