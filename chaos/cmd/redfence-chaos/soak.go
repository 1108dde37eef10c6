package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/harness"
)

const soakUsage = `Usage: redfence-chaos soak -duration D [flags]

Runs the soak (docs/soak.md): for each lock (or -lock) and backend, four
clients for -duration under a seeded mix of every fault the harness has,
within what the lock tolerates (-unsafe: beyond it), with progress lines,
then a summary table; a run with a violation saves its history under
-artifacts. The locks run over go-redis clients.

Exit status: 0 if no run found a violation, 1 otherwise or on error, 2 for
bad flags, 130 when interrupted.
`

// parseSoakFlags parses the soak command's arguments. Errors and -h output
// go to stderr; -h returns flag.ErrHelp.
func parseSoakFlags(args []string, stderr io.Writer) (chaosConfig, error) {
	var c chaosConfig
	fs := newFlagSet(prog+" soak", soakUsage, stderr)
	c.registerCommon(fs)
	fs.DurationVar(&c.soak, "duration", 0, "how long each lock's soak runs (required; e.g. 10m): random faults within what the lock tolerates, every check on")
	fs.BoolVar(&c.unsafe, "unsafe", false, "also inject the faults the lock does not tolerate; double grants are then allowed, fenced violations are not")
	fs.BoolVar(&c.parallel, "parallel", false, "run every lock's soak on every backend at once instead of one after another (the load slows acquires: docs/soak.md)")
	fs.StringVar(&c.json, "json", "", "also write the command, its commit and every run's result as JSON to this file (make soak: docs/soak/BACKEND-MODE.json, which make chaos puts into docs/chaos.md)")
	if err := parseNoArgs(fs, args); err != nil {
		return c, err
	}
	if err := c.checkCommon(fs); err != nil {
		return c, err
	}
	if c.soak <= 0 {
		return c, usageErrorf(fs, "-duration is required and must be positive (e.g. -duration 10m), got %v", c.soak)
	}
	c.args = args
	return c, nil
}

// soakConfig is one configuration a soak runs: a lock, and for single
// whether it runs over Sentinel.
type soakConfig struct {
	lock     string
	sentinel bool
}

func (s soakConfig) String() string { return harness.SoakConfig(s.lock, s.sentinel) }

// soakConfigs lists the configurations a soak runs: redlock, single, and
// single over Sentinel; -lock single keeps both of single's.
func (c chaosConfig) soakConfigs() []soakConfig {
	var out []soakConfig
	for _, s := range []soakConfig{{chaos.LockRedlock, false}, {chaos.LockSingle, false}, {chaos.LockSingle, true}} {
		if c.lock == "" || c.lock == s.lock {
			out = append(out, s)
		}
	}
	return out
}

// soakProgressEvery is how often a soak of d prints progress: every 10s,
// or four times in all for a shorter soak.
func soakProgressEvery(d time.Duration) time.Duration {
	return min(harness.DefaultSoakProgress, max(d/4, time.Second))
}

// soakSampleEvery is how often a soak of d samples goroutines and memory:
// every 2s, or twenty times in all for a shorter soak.
func soakSampleEvery(d time.Duration) time.Duration {
	return min(harness.DefaultSoakSample, max(d/20, 250*time.Millisecond))
}

// runSoakCommand implements "redfence-chaos soak": every configuration on
// every backend, one after another, or all at once with -parallel.
func runSoakCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseSoakFlags(args, stderr)
	if err != nil {
		return parseCode(err)
	}
	bin, err := systemRedisFinder().find(ctx, cfg.redisServer, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, prog+" soak: %v\n", err)
		return failureCode(ctx)
	}
	names, _ := chaosBackends(ctx, cfg.backend, stderr)
	redis.SetLogger(newDedupLogger(io.Discard)) // the faults are deliberate: see runScenariosCommand
	defer logging.Enable()

	out := &lockedWriter{w: stdout}
	failed := false
	var jobs []soakJob
	var backends []chaos.Backend
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		b, err := newChaosBackend(ctx, name, bin)
		if err != nil {
			fmt.Fprintf(stderr, prog+" soak: %s backend: %v\n", name, err)
			failed = true
			continue
		}
		backends = append(backends, b)
		for _, sc := range cfg.soakConfigs() {
			jobs = append(jobs, soakJob{backend: name, b: b, sc: sc})
		}
	}
	started := time.Now()
	results := make([]soakRun, len(jobs))
	fails := make([]bool, len(jobs))
	if cfg.parallel {
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() { results[i], fails[i] = j.run(ctx, cfg, out) })
		}
		wg.Wait()
	} else {
		for i, j := range jobs {
			if ctx.Err() != nil {
				results, fails = results[:i], fails[:i]
				break
			}
			results[i], fails[i] = j.run(ctx, cfg, out)
		}
	}
	for i, b := range backends {
		if err := b.Close(); err != nil {
			fmt.Fprintf(stderr, prog+" soak: %s backend: %v\n", names[i], err)
			failed = true
		}
	}
	failed = failed || slices.Contains(fails, true)
	fmt.Fprintln(stdout)
	table := make([]harness.SoakResult, len(results))
	for i, r := range results {
		table[i] = r.SoakResult
	}
	if err := harness.WriteSoakTable(stdout, table); err != nil {
		fmt.Fprintf(stderr, prog+" soak: %v\n", err)
		return exitFailure
	}
	if cfg.json != "" && len(results) > 0 {
		rec := soakRecord{Command: prog + " soak " + strings.Join(withoutFlag(cfg.args, "json"), " "), Commit: buildCommit(), Machine: machine(),
			Started: started.UTC(), Ended: time.Now().UTC(), Runs: results}
		if err := writeSoakRecord(cfg.json, rec); err != nil {
			fmt.Fprintf(stderr, prog+" soak: %v\n", err)
			failed = true
		}
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case failed:
		fmt.Fprintf(stdout, "FAIL: a soak run found a violation or could not run (seed %d; artifacts under %s)\n", cfg.seed, cfg.artifacts)
		return exitFailure
	}
	fmt.Fprintf(stdout, "PASS: no violation (seed %d)\n", cfg.seed)
	return exitOK
}

// soakJob is one soak run: a configuration on a backend.
type soakJob struct {
	backend string
	b       chaos.Backend
	sc      soakConfig
}

// run runs the soak, printing a line before and after it (and the
// progress lines between), and reports whether it failed.
func (j soakJob) run(ctx context.Context, cfg chaosConfig, stdout io.Writer) (soakRun, bool) {
	opts := harness.SoakOptions{Lock: j.sc.lock, Sentinel: j.sc.sentinel, Unsafe: cfg.unsafe, Duration: cfg.soak, Seed: cfg.seed,
		Progress: stdout, ProgressEvery: soakProgressEvery(cfg.soak), SampleEvery: soakSampleEvery(cfg.soak), ArtifactsDir: cfg.artifacts}
	fmt.Fprintf(stdout, "soak: %s %s %s, %v, seed %d\n", j.backend, j.sc, verdictMode(cfg.unsafe), cfg.soak, cfg.seed)
	t0 := time.Now()
	res, err := harness.Soak(ctx, j.b, opts)
	verdict := "pass"
	if !res.Pass {
		verdict = "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s %s %s: %s in %v (%d ops, %d grants)\n", j.backend, j.sc, verdictMode(cfg.unsafe), verdict,
		time.Since(t0).Round(time.Second), res.Ops, res.Grants)
	if err != nil {
		fmt.Fprintf(&b, "    error: %v\n", err)
	}
	if res.Artifacts != "" {
		fmt.Fprintf(&b, "    artifacts: %s\n", res.Artifacts)
	}
	_, _ = io.WriteString(stdout, b.String())
	run := soakRun{SoakResult: res}
	if err != nil {
		run.Error = err.Error()
	}
	return run, !res.Pass || err != nil
}

// lockedWriter serialises writes, so that soaks run at once (-parallel)
// print whole lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func verdictMode(unsafe bool) string {
	if unsafe {
		return "unsafe"
	}
	return "safe"
}
