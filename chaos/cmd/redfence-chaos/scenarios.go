package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/docker"
	"github.com/redfence/redfence/chaos/internal/harness"
)

// Backend names for -backend.
const (
	backendProcess = "process"
	backendDocker  = "docker"
	backendAll     = "all"
)

// dockerInfoTimeout bounds the `docker info` probe of -backend all.
const dockerInfoTimeout = 20 * time.Second

// chaosConfig is the parsed command line of redfence-chaos scenarios and
// redfence-chaos soak: the flags they share, and each one's own.
type chaosConfig struct {
	backend     string
	lock        string // "" for every lock a scenario applies to
	seed        int64
	artifacts   string
	redisServer string

	// scenarios only
	scenarios []string // names from -scenario; empty: all
	duration  time.Duration
	out       string
	client    string // -client: go-redis, rueidis or all

	// soak only (soak.go)
	soak     time.Duration // -duration: how long each soak run lasts
	unsafe   bool          // -unsafe: the soak's unsafe runs
	parallel bool          // -parallel: the soak's runs at once
	json     string        // -json: where the soak writes its record (soak_record.go)
	args     []string      // the command's arguments, for the soak's record (set by runSoakCommand)
}

const scenariosUsage = `Usage: redfence-chaos scenarios [flags]

Runs the chaos suite (docs/chaos.md): fifteen fault scenarios against redlock
and single, each on fresh Redis nodes (local processes or Docker containers),
four clients with their own proxied links, fencing tokens checked by a Redis
guard on a node no fault touches, and an unfenced counter as the control.
Each run is checked against the scenario's own expectation: safe scenarios
must show no double grant and no fenced-resource violation; the scenarios
documented as unsafe must provoke the double grant they describe. One
progress line is printed per run, then the results table. A run that misses
its expectation saves its history under -artifacts.

Exit status: 0 if every run met its expectation, 1 otherwise or on error,
2 for bad flags, 130 when interrupted.
`

// registerCommon adds the flags that scenarios and soak share to fs.
func (c *chaosConfig) registerCommon(fs *flag.FlagSet) {
	fs.StringVar(&c.backend, "backend", backendProcess, "where nodes run: process (local redis-server), docker (containers), or all (both; docker is skipped, loudly, only if \"docker info\" fails)")
	fs.StringVar(&c.lock, "lock", "", "run only this lock: redlock or single (default: every lock)")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the workload jitter and the random fault schedules; the same seed replays the same schedule")
	fs.StringVar(&c.artifacts, "artifacts", filepath.Join(os.TempDir(), "redfence-chaos"), "where a run that misses its expectation saves its history, porcupine timelines and seed")
	fs.StringVar(&c.redisServer, "redis-server", "", "redis-server executable (default $REDFENCE_REDIS_SERVER, else redis-server on PATH)")
}

// checkCommon checks the shared flags' values.
func (c chaosConfig) checkCommon(fs *flag.FlagSet) error {
	switch c.backend {
	case backendProcess, backendDocker, backendAll:
	default:
		return usageErrorf(fs, "-backend must be process, docker or all, got %q", c.backend)
	}
	switch c.lock {
	case "", chaos.LockRedlock, chaos.LockSingle:
	default:
		return usageErrorf(fs, "-lock must be redlock or single, got %q", c.lock)
	}
	return nil
}

// parseScenariosFlags parses the scenarios command's arguments. Errors and
// -h output go to stderr; -h returns flag.ErrHelp.
func parseScenariosFlags(args []string, stderr io.Writer) (chaosConfig, error) {
	var c chaosConfig
	var scen string
	fs := newFlagSet(prog+" scenarios", scenariosUsage, stderr)
	c.registerCommon(fs)
	fs.StringVar(&scen, "scenario", "", "scenarios to run, comma-separated: a number (6 runs 6a, 6b, 6c) or a variant (6b); default all")
	fs.StringVar(&c.client, "client", chaos.ClientGoRedis, "the Redis client the locks run over: go-redis, rueidis (module rfrueidis; not the Sentinel scenarios), or all (go-redis on every backend, then rueidis on the process backend)")
	fs.DurationVar(&c.duration, "duration", chaos.DefaultScenarioDuration, "workload duration per scenario (some scenarios stretch it to fit their schedule)")
	fs.StringVar(&c.out, "out", "", "also write the results and the scenario descriptions as Markdown to this file (docs/chaos.md)")
	if err := parseNoArgs(fs, args); err != nil {
		return c, err
	}
	if err := c.checkCommon(fs); err != nil {
		return c, err
	}
	switch c.client {
	case chaos.ClientGoRedis, chaos.ClientRueidis, clientAll:
	default:
		return c, usageErrorf(fs, "-client must be go-redis, rueidis or all, got %q", c.client)
	}
	if c.duration <= 0 {
		return c, usageErrorf(fs, "-duration must be positive, got %v", c.duration)
	}
	for _, name := range strings.Split(scen, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, err := chaos.FindScenarios(name); err != nil {
			return c, usageErrorf(fs, "-scenario: %v", strings.TrimPrefix(err.Error(), chaos.ErrInvalidScenario.Error()+": "))
		}
		c.scenarios = append(c.scenarios, name)
	}
	return c, nil
}

// chaosRun is one (scenario, lock) pair to run on every backend.
type chaosRun struct {
	sc   chaos.Scenario
	lock string
}

// plan lists the runs the configuration asks for, in suite order.
func (c chaosConfig) plan() []chaosRun {
	var scs []chaos.Scenario
	if len(c.scenarios) == 0 {
		for _, sc := range chaos.Scenarios() {
			scs = append(scs, sc.Runs()...)
		}
	} else {
		for _, name := range c.scenarios {
			found, _ := chaos.FindScenarios(name) // validated by parseChaosFlags
			scs = append(scs, found...)
		}
	}
	var runs []chaosRun
	for _, sc := range scs {
		for _, lock := range sc.Locks {
			if c.lock == "" || c.lock == lock {
				runs = append(runs, chaosRun{sc, lock})
			}
		}
	}
	return runs
}

// backendRun is what one backend's pass produced.
type backendRun struct {
	name    string
	client  string // the Redis client of the pass's locks
	results []chaos.Result
	elapsed time.Duration
}

// runScenariosCommand implements "redfence-chaos scenarios".
func runScenariosCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseScenariosFlags(args, stderr)
	if err != nil {
		return parseCode(err)
	}
	runs := cfg.plan()
	if len(runs) == 0 {
		fmt.Fprintf(stderr, prog+" scenarios: no scenario among %q applies to lock %q\n", cfg.scenarios, cfg.lock)
		return exitUsage
	}
	bin, err := systemRedisFinder().find(ctx, cfg.redisServer, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, prog+" scenarios: %v\n", err)
		return failureCode(ctx)
	}
	backends, notes := chaosBackends(ctx, cfg.backend, stderr)
	passes := cfg.passes(backends)
	// The faults are deliberate: go-redis's complaints about them (failed
	// dials, resets) are noise here. Its logger is process-wide: restore the
	// default one when done.
	redis.SetLogger(newDedupLogger(io.Discard))
	defer logging.Enable()

	start := time.Now()
	var done []backendRun
	failed := false
	for _, p := range passes {
		br, err := runBackend(ctx, p.backend, bin, cfg, forClient(runs, p.client), p.client, stdout)
		name := p.label()
		if len(br.results) > 0 {
			done = append(done, br)
		}
		for _, r := range br.results {
			failed = failed || !r.Pass
		}
		if err != nil {
			fmt.Fprintf(stderr, prog+" scenarios: %s backend: %v\n", name, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
		}
	}
	var all []chaos.Result
	for _, br := range done {
		all = append(all, br.results...)
	}
	fmt.Fprintln(stdout)
	if err := harness.WriteTable(stdout, all); err != nil {
		fmt.Fprintf(stderr, prog+" scenarios: %v\n", err)
		return exitFailure
	}
	for _, br := range done {
		fmt.Fprintf(stdout, "%s backend: %d runs in %v\n", br.label(), len(br.results), br.elapsed.Round(time.Second))
	}
	if cfg.out != "" && len(all) > 0 {
		soak, err := readSoakRecords(filepath.Join(filepath.Dir(cfg.out), "soak"))
		if err != nil {
			fmt.Fprintf(stderr, prog+" scenarios: %v\n", err)
			return exitFailure
		}
		meta := chaosDocMeta{
			soak:     soak,
			command:  prog + " scenarios " + strings.Join(args, " "),
			seed:     cfg.seed,
			duration: cfg.duration,
			date:     start,
			backends: done,
			notes:    notes,
		}
		if err := writeChaosDocFile(cfg.out, meta, all); err != nil {
			fmt.Fprintf(stderr, prog+" scenarios: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "wrote %s\n", cfg.out)
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case failed:
		fmt.Fprintf(stdout, "FAIL: at least one run missed its expectation (artifacts under %s)\n", cfg.artifacts)
		return exitFailure
	}
	fmt.Fprintln(stdout, "PASS: every run met its expectation")
	return exitOK
}

// chaosBackends lists the backends -backend names; with "all", docker is
// skipped, loudly (a note for the report), when `docker info` fails.
func chaosBackends(ctx context.Context, backend string, stderr io.Writer) (backends, notes []string) {
	if backend != backendAll {
		return []string{backend}, nil
	}
	if err := dockerInfo(ctx); err != nil {
		msg := fmt.Sprintf("`docker info` failed (%v): the docker backend is SKIPPED and only the process backend runs", err)
		fmt.Fprintf(stderr, "\n!!! %s: %s !!!\n\n", prog, msg)
		return []string{backendProcess}, []string{"WARNING: " + msg + "."}
	}
	return []string{backendProcess, backendDocker}, nil
}

// dockerInfo runs `docker info`, bounded by dockerInfoTimeout.
func dockerInfo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dockerInfoTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput()
	if err != nil {
		last := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if last != "" {
			return fmt.Errorf("%w: %s", err, last)
		}
		return err
	}
	return nil
}

// newChaosBackend starts the named backend.
func newChaosBackend(ctx context.Context, name, bin string) (chaos.Backend, error) {
	if name == backendDocker {
		// The image is built from this redis-server.
		if os.Getenv(docker.EnvRedisServer) == "" {
			if err := os.Setenv(docker.EnvRedisServer, bin); err != nil {
				return nil, err
			}
		}
		return docker.NewBackend(ctx)
	}
	return chaos.NewProcessBackend(chaos.WithRedisServer(bin)), nil
}

// runBackend runs every planned run on one backend, printing a progress
// line per run.
func runBackend(ctx context.Context, name, bin string, cfg chaosConfig, runs []chaosRun, client string, stdout io.Writer) (br backendRun, err error) {
	br.name, br.client = name, client
	start := time.Now()
	defer func() { br.elapsed = time.Since(start) }()
	b, err := newChaosBackend(ctx, name, bin)
	if err != nil {
		return br, err
	}
	defer func() {
		if cErr := b.Close(); cErr != nil {
			err = errors.Join(err, cErr)
		}
	}()
	opts := chaos.RunOptions{Seed: cfg.seed, Duration: cfg.duration, ArtifactsDir: cfg.artifacts, Client: client}
	var errs []error
	for _, run := range runs {
		if ctx.Err() != nil {
			return br, errors.Join(append(errs, ctx.Err())...)
		}
		t0 := time.Now()
		res, err := chaos.Run(ctx, b, run.sc, run.lock, opts)
		br.results = append(br.results, res)
		fmt.Fprintln(stdout, progressLine(res, time.Since(t0)))
		if err != nil {
			fmt.Fprintf(stdout, "    error: %v\n", err)
			errs = append(errs, err)
		}
		if !res.Pass {
			fmt.Fprintf(stdout, "    %s\n", res.Note)
		}
	}
	return br, errors.Join(errs...)
}

// progressLine is the one-line summary of a run.
func progressLine(r chaos.Result, took time.Duration) string {
	verdict := "pass"
	if !r.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%-7s %-3s %-7s %-4s %5.1fs  grants %d, double %d, stale rejected %d, fenced violations %d, lost updates %d, keys left %d",
		harness.Where(r), r.Scenario, r.Lock, verdict, took.Seconds(), r.Grants, r.DoubleGrants, r.FencedRejected, r.FencedViolations, r.LostUpdates, r.KeysLeft)
}
