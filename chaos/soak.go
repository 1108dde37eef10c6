package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/redfence/redfence/chaos/internal/harness"
	"github.com/redfence/redfence/internal/nilcheck"
)

func init() { harness.Soak = soak }

// soakDefaults returns o with its defaults filled in, or an error wrapping
// ErrInvalidScenario.
func soakDefaults(o harness.SoakOptions) (harness.SoakOptions, error) {
	if o.Lock != LockRedlock && o.Lock != LockSingle {
		return o, invalidScenario("soak: lock must be %s or %s, got %q", LockRedlock, LockSingle, o.Lock)
	}
	if o.Sentinel && o.Lock != LockSingle {
		return o, invalidScenario("soak: Sentinel goes with lock %s, not %s", LockSingle, o.Lock)
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
	def(&o.Duration, harness.DefaultSoakDuration)
	def(&o.Window, harness.DefaultSoakWindow)
	def(&o.CheckTimeout, defaultCheckTimeout)
	def(&o.ProgressEvery, harness.DefaultSoakProgress)
	def(&o.SampleEvery, harness.DefaultSoakSample)
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

// soakDrainEvery is how often a soak's checks take the completed
// operations from its history (soakChecker).
const soakDrainEvery = 250 * time.Millisecond

// soak is harness.Soak: it runs the lock's workload with scenarioClients
// clients for opts.Duration while a seeded nemesis mixes every fault the
// harness has within the lock's tolerance (soakPolicy; opts.Unsafe goes
// beyond it), and checks the history as it grows (soakChecker: nothing of
// it stays in memory), then the samples (see checkSoak). It returns an
// error only when the run could not be carried out; violations are in the
// result (Pass).
func soak(ctx context.Context, hb harness.Backend, opts harness.SoakOptions) (res harness.SoakResult, err error) {
	if nilcheck.IsNil(hb) {
		return res, invalidScenario("nil backend")
	}
	backend, ok := hb.(Backend)
	if !ok {
		return res, invalidScenario("soak: %T is not a chaos.Backend", hb)
	}
	if opts, err = soakDefaults(opts); err != nil {
		return res, err
	}
	res = harness.SoakResult{Lock: opts.Lock, Sentinel: opts.Sentinel, Backend: backend.Name(), Unsafe: opts.Unsafe, Seed: opts.Seed,
		Duration: opts.Duration, Window: opts.Window}
	sc := soakScenario(opts.Unsafe)
	if opts.Sentinel {
		sc = soakSentinelScenario(opts.Unsafe)
	}
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
	inj := &runInjector{ctx: ctx, r: r, targets: r.nodes, offset: map[int]int{}}
	if opts.Sentinel {
		inj.sent = newSoakSentinel(r)
		inj.targets, inj.settle = inj.sent.nodes, inj.sent.settle
		if err := inj.sent.settle(ctx); err != nil {
			return res, fail("setup", err)
		}
	}
	nem := newNemesis(soakPolicy(opts.Lock, opts.Sentinel, len(inj.targets), opts.Unsafe), opts.Seed, len(inj.targets),
		scenarioClients, r.quaran, inj)
	var file *historyFile
	if opts.ArtifactsDir != "" {
		if file, err = createHistoryFile(opts.ArtifactsDir); err != nil {
			return res, fail("setup", err)
		}
		defer func() {
			if !res.Pass && res.Artifacts != "" {
				return // kept
			}
			if rmErr := file.remove(); rmErr != nil {
				err = errors.Join(err, fail("teardown", rmErr))
			}
		}()
	}
	chk := newSoakChecker(r.start, opts, file)
	smp := newSampler(r.all)
	defer smp.close()

	mctx, stopMonitor := context.WithCancel(ctx)
	var (
		mon      sync.WaitGroup
		drainErr error
	)
	mon.Go(func() { smp.run(mctx, opts.SampleEvery) })
	mon.Go(func() { drainErr = chk.drainEvery(mctx, r.h, soakDrainEvery) })
	if opts.Progress != nil {
		mon.Go(func() { soakProgress(mctx, opts, r.backend.Name(), nem, chk) })
	}
	playErr := r.soakWorkload(ctx, opts.Duration, func(wctx context.Context) error {
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
	finishErr := errors.Join(drainErr, r.finish(ctx))
	finishErr = errors.Join(finishErr, chk.finish(r.h))
	checkSoak(&res, r, nem, inj.sent, chk, smp.samples())
	if playErr != nil || finishErr != nil {
		res.Pass = false
		return res, fail("play", errors.Join(playErr, finishErr))
	}
	if !res.Pass && file != nil {
		name := fmt.Sprintf("%s-%s-%s-seed%d", sc.Name, opts.Lock, backend.Name(), opts.Seed)
		res.Artifacts = filepath.Join(opts.ArtifactsDir, name)
		if aErr := writeSoakArtifacts(&res, chk.windows.failing, file, opts.CheckTimeout); aErr != nil {
			return res, fail("artifacts", aErr)
		}
	}
	return res, nil
}

// soakWorkload runs the workload of every client slot for d, its clients
// keeping no operations (the soak's checks read them from the history),
// while faults runs with a context that ends with the workload, and joins
// both. A fault that fails ends the workload at once: a soak whose nemesis
// has stopped would only go on without faults.
func (r *run) soakWorkload(ctx context.Context, d time.Duration, faults func(wctx context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		wg   sync.WaitGroup
		fErr error
	)
	wg.Go(func() {
		if fErr = faults(wctx); fErr != nil {
			cancel()
		}
	})
	w := r.newWorkload(scenarioClients)
	w.statsOff = true
	_, wErr := w.Run(wctx, r.h)
	wg.Wait()
	return errors.Join(wErr, fErr, ctx.Err())
}

// soakProgress prints a line every opts.ProgressEvery until ctx ends: the
// operations checked and the faults so far, and the violations found in
// them.
func soakProgress(ctx context.Context, opts harness.SoakOptions, backend string, nem *nemesis, chk *soakChecker) {
	t := time.NewTicker(opts.ProgressEvery)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		faults, _ := nem.faultCounts()
		total := 0
		for _, n := range faults {
			total += n
		}
		double := int64(0)
		if !opts.Unsafe {
			double = chk.doubleSeen.Load()
		}
		fmt.Fprintf(opts.Progress, "  %s %s%s %4.0fs/%v: %d ops, %d faults, violations so far: %d double grants, %d fenced, %d token\n",
			backend, harness.SoakConfig(opts.Lock, opts.Sentinel), verdictWord(opts.Unsafe, " unsafe", ""),
			time.Since(start).Seconds(), opts.Duration, chk.opsSeen.Load(), total, double, chk.fencedSeen.Load(), chk.tokenSeen.Load())
	}
}
