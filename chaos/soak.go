package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redfence/redfence/internal/nilcheck"
)

// Defaults of SoakOptions.
const (
	DefaultSoakDuration = 10 * time.Minute
	DefaultSoakWindow   = 5 * time.Second
	DefaultSoakProgress = 10 * time.Second
	DefaultSoakSample   = 2 * time.Second
)

// SoakOptions configures Soak. Zero fields take their defaults.
type SoakOptions struct {
	// Lock is LockRedlock or LockSingle.
	Lock string
	// Unsafe adds the faults the lock is documented not to tolerate (clock
	// jumps, FLUSHALL on single, a disturbed majority for redlock): double
	// grants are then allowed, fenced-resource violations still are not.
	Unsafe bool
	// Duration is how long the workload runs. The default is
	// DefaultSoakDuration.
	Duration time.Duration
	// Seed seeds the fault schedule and the workload's jitter.
	Seed int64
	// Window is the width of the windows the mutex model is checked over
	// (see mutexWindows). The default is DefaultSoakWindow.
	Window time.Duration
	// CheckTimeout bounds each window's porcupine check. The default is
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Progress, if not nil, gets a line every ProgressEvery (default
	// DefaultSoakProgress): operations, faults and violations so far.
	Progress      io.Writer
	ProgressEvery time.Duration
	// SampleEvery is how often goroutines, heap and Redis used_memory are
	// sampled. The default is DefaultSoakSample.
	SampleEvery time.Duration
	// ArtifactsDir, if set, is where a run with a violation saves its
	// history, the timelines of its failing windows and a summary with the
	// seed.
	ArtifactsDir string
}

func (o SoakOptions) withDefaults() (SoakOptions, error) {
	if o.Lock != LockRedlock && o.Lock != LockSingle {
		return o, invalidScenario("soak: lock must be %s or %s, got %q", LockRedlock, LockSingle, o.Lock)
	}
	for _, d := range []*time.Duration{&o.Duration, &o.Window, &o.CheckTimeout, &o.ProgressEvery, &o.SampleEvery} {
		if *d < 0 {
			return o, invalidScenario("soak: negative duration %v", *d)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Duration, DefaultSoakDuration)
	def(&o.Window, DefaultSoakWindow)
	def(&o.CheckTimeout, DefaultCheckTimeout)
	def(&o.ProgressEvery, DefaultSoakProgress)
	def(&o.SampleEvery, DefaultSoakSample)
	return o, nil
}

// soakScenario is the Scenario a soak run is set up from: AOFAlways nodes
// (restarts keep what they acknowledged), a clock shim for the unsafe runs.
func soakScenario(unsafe bool) Scenario {
	name := "soak"
	if unsafe {
		name = "soak-unsafe"
	}
	return Scenario{Name: name, Locks: []string{LockRedlock, LockSingle}, spec: NodeSpec{Persistence: AOFAlways, Clock: unsafe}, unsafe: unsafe}
}

// Soak runs the lock's workload with ScenarioClients clients for
// opts.Duration while a seeded nemesis mixes every fault the harness has
// within the lock's tolerance (soakPolicy; opts.Unsafe goes beyond it), then
// checks the whole history (see SoakResult). It returns an error only when
// the run could not be carried out; violations are in the result (Pass).
func Soak(ctx context.Context, backend Backend, opts SoakOptions) (res SoakResult, err error) {
	if nilcheck.IsNil(backend) {
		return res, invalidScenario("nil backend")
	}
	if opts, err = opts.withDefaults(); err != nil {
		return res, err
	}
	res = SoakResult{Lock: opts.Lock, Backend: backend.Name(), Unsafe: opts.Unsafe, Seed: opts.Seed, Duration: opts.Duration, Window: opts.Window}
	sc := soakScenario(opts.Unsafe)
	fail := func(step string, e error) error {
		return &RunError{Scenario: sc.Name, Lock: opts.Lock, Backend: backend.Name(), Step: step, Err: e}
	}
	r, err := setup(ctx, backend, sc, opts.Lock, RunOptions{Seed: opts.Seed, Duration: opts.Duration, CheckTimeout: opts.CheckTimeout})
	if err != nil {
		return res, fail("setup", err)
	}
	defer func() {
		if cErr := r.close(); cErr != nil {
			err = errors.Join(err, fail("teardown", cErr))
		}
	}()
	nem := newNemesis(soakPolicy(opts.Lock, len(r.nodes), opts.Unsafe), opts.Seed, len(r.nodes), ScenarioClients, r.quaran,
		&runInjector{ctx: ctx, r: r, offset: map[int]int{}})
	smp := newSampler(r.all)
	defer smp.close()

	mctx, stopMonitor := context.WithCancel(ctx)
	var mon sync.WaitGroup
	mon.Go(func() { smp.run(mctx, opts.SampleEvery) })
	if opts.Progress != nil {
		mon.Go(func() { soakProgress(mctx, opts, r, nem) })
	}
	playErr := r.workload(ctx, ScenarioClients, opts.Duration, func(wctx context.Context, _ time.Time) error {
		var errs []error
		for {
			wake, err := nem.step(time.Now())
			errs = append(errs, err)
			if err != nil || !sleepUntil(wctx, wake) {
				break
			}
		}
		return errors.Join(append(errs, nem.heal(time.Now(), true))...)
	})
	stopMonitor()
	mon.Wait()
	r.end = r.h.Now()
	finishErr := r.finish(ctx)
	res.check(r, nem, smp.samples(), opts)
	if playErr != nil || finishErr != nil {
		res.Pass = false
		return res, fail("play", errors.Join(playErr, finishErr))
	}
	if !res.Pass && opts.ArtifactsDir != "" {
		name := fmt.Sprintf("%s-%s-%s-seed%d", sc.Name, opts.Lock, backend.Name(), opts.Seed)
		res.Artifacts = filepath.Join(opts.ArtifactsDir, name)
		if aErr := res.writeArtifacts(r.h, opts.CheckTimeout); aErr != nil {
			return res, fail("artifacts", aErr)
		}
	}
	return res, nil
}

// progressLag is how far behind the present the progress lines check: an
// operation's fields (a Release's lease) are recorded when it returns, and
// every cycle step returns within the workload's OpTimeout, so ops called
// progressLag ago are complete enough for a violation count that later
// operations cannot take back.
const progressLag = 2 * DefaultOpTimeout

// soakProgress prints a line every opts.ProgressEvery until ctx ends: the
// operations and faults so far, and the violations among the operations
// called up to progressLag ago.
func soakProgress(ctx context.Context, opts SoakOptions, r *run, nem *nemesis) {
	t := time.NewTicker(opts.ProgressEvery)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		all := r.h.Ops()
		horizon := r.h.Now() - progressLag
		ops := all[:sort.Search(len(all), func(i int) bool { return all[i].Call >= horizon })] // Ops is sorted by Call
		faults, _ := nem.faultCounts()
		total := 0
		for _, n := range faults {
			total += n
		}
		double := 0
		if !opts.Unsafe {
			double = len(Overlaps(ops))
		}
		fenced := len(FencedViolations(ops))
		dups, regressions, _ := tokenProblems(ops)
		fmt.Fprintf(opts.Progress, "  %s %s%s %4.0fs/%v: %d ops, %d faults, violations so far: %d double grants, %d fenced, %d token\n",
			r.backend.Name(), opts.Lock, verdictWord(opts.Unsafe, " unsafe", ""),
			time.Since(start).Seconds(), opts.Duration, len(all), total, double, fenced, dups+regressions)
	}
}

// faultSummary formats fault counts by kind, in the nemesis's kind order.
func faultSummary(counts map[string]int) string {
	var parts []string
	for _, k := range soakFaultNames {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
