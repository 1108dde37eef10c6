package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/chaos"
)

// checkSoakFlags checks the flags that go with -soak.
func (c chaosConfig) checkSoakFlags(fs *flag.FlagSet) error {
	switch {
	case c.soak < 0:
		return usageErrorf(fs, "-soak must be positive, got %v", c.soak)
	case c.soak == 0 && c.unsafe:
		return usageErrorf(fs, "-unsafe goes with -soak")
	case c.soak > 0 && (len(c.scenarios) > 0 || c.out != ""):
		return usageErrorf(fs, "-soak runs no scenario and writes no report: drop -scenario and -out")
	}
	return nil
}

// soakLocks lists the locks a soak runs: -lock, or both.
func (c chaosConfig) soakLocks() []string {
	if c.lock != "" {
		return []string{c.lock}
	}
	return []string{chaos.LockRedlock, chaos.LockSingle}
}

// soakProgressEvery is how often a soak of d prints progress: every 10s,
// or four times in all for a shorter soak.
func soakProgressEvery(d time.Duration) time.Duration {
	return min(chaos.DefaultSoakProgress, max(d/4, time.Second))
}

// soakSampleEvery is how often a soak of d samples goroutines and memory:
// every 2s, or twenty times in all for a shorter soak.
func soakSampleEvery(d time.Duration) time.Duration {
	return min(chaos.DefaultSoakSample, max(d/20, 250*time.Millisecond))
}

// runSoakCommand implements "redfence chaos -soak DURATION".
func runSoakCommand(ctx context.Context, cfg chaosConfig, stdout, stderr io.Writer) int {
	bin, err := systemRedisFinder().find(ctx, cfg.redisServer, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "redfence chaos: %v\n", err)
		return failureCode(ctx)
	}
	backends, _ := chaosBackends(ctx, cfg.backend, stderr)
	redis.SetLogger(newDedupLogger(io.Discard)) // the faults are deliberate: see runChaosCommand
	defer logging.Enable()

	var results []chaos.SoakResult
	failed := false
	for _, name := range backends {
		if ctx.Err() != nil {
			break
		}
		b, err := newChaosBackend(ctx, name, bin)
		if err != nil {
			fmt.Fprintf(stderr, "redfence chaos: %s backend: %v\n", name, err)
			failed = true
			continue
		}
		for _, lock := range cfg.soakLocks() {
			if ctx.Err() != nil {
				break
			}
			opts := chaos.SoakOptions{Lock: lock, Unsafe: cfg.unsafe, Duration: cfg.soak, Seed: cfg.seed,
				Progress: stdout, ProgressEvery: soakProgressEvery(cfg.soak), SampleEvery: soakSampleEvery(cfg.soak), ArtifactsDir: cfg.artifacts}
			fmt.Fprintf(stdout, "soak: %s %s %s, %v, seed %d\n", name, lock, verdictMode(cfg.unsafe), cfg.soak, cfg.seed)
			t0 := time.Now()
			res, err := chaos.Soak(ctx, b, opts)
			results = append(results, res)
			verdict := "pass"
			if !res.Pass {
				verdict = "FAIL"
				failed = true
			}
			fmt.Fprintf(stdout, "soak: %s %s %s: %s in %v (%d ops, %d grants)\n", name, lock, verdictMode(cfg.unsafe), verdict,
				time.Since(t0).Round(time.Second), res.Ops, res.Grants)
			if err != nil {
				fmt.Fprintf(stdout, "    error: %v\n", err)
				failed = true
			}
			if res.Artifacts != "" {
				fmt.Fprintf(stdout, "    artifacts: %s\n", res.Artifacts)
			}
		}
		if err := b.Close(); err != nil {
			fmt.Fprintf(stderr, "redfence chaos: %s backend: %v\n", name, err)
			failed = true
		}
	}
	fmt.Fprintln(stdout)
	if err := chaos.WriteSoakTable(stdout, results); err != nil {
		fmt.Fprintf(stderr, "redfence chaos: %v\n", err)
		return exitFailure
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

func verdictMode(unsafe bool) string {
	if unsafe {
		return "unsafe"
	}
	return "safe"
}
