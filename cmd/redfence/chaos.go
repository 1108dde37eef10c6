package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/docker"
)

// Backend names for -backend.
const (
	backendProcess = "process"
	backendDocker  = "docker"
	backendAll     = "all"
)

// dockerInfoTimeout bounds the `docker info` probe of -backend all.
const dockerInfoTimeout = 20 * time.Second

// chaosConfig is the parsed command line of redfence chaos.
type chaosConfig struct {
	backend     string
	scenarios   []string // names from -scenario; empty: all
	lock        string   // "" for every lock a scenario applies to
	seed        int64
	duration    time.Duration
	out         string
	artifacts   string
	redisServer string
	soak        time.Duration // -soak: run the soak (soak.go) for this long per run instead of the scenarios
	unsafe      bool          // -unsafe: the soak's unsafe runs
}

const chaosUsage = `Usage: redfence chaos [flags]

Runs the chaos suite (docs/chaos.md): fifteen fault scenarios against redlock
and single, each on fresh Redis nodes (local processes or Docker containers),
four clients with their own proxied links, fencing tokens checked by a Redis
guard on a node no fault touches, and an unfenced counter as the control.
Each run is checked against the scenario's own expectation: safe scenarios
must show no double grant and no fenced-resource violation; the scenarios
documented as unsafe must provoke the double grant they describe. One
progress line is printed per run, then the results table. A run that misses
its expectation saves its history under -artifacts.

With -soak DURATION it runs the soak instead: for each lock (or -lock) and
backend, four clients for DURATION under a seeded mix of every fault the
harness has, within what the lock tolerates (-unsafe: beyond it), with
progress lines, then a summary table; a run with a violation saves its
history under -artifacts.

Exit status: 0 if every run met its expectation (soak: found no violation), 1 otherwise or on error,
2 for bad flags, 130 when interrupted.
`

// parseChaosFlags parses the chaos command's arguments. Errors and -h output
// go to stderr; -h returns flag.ErrHelp.
func parseChaosFlags(args []string, stderr io.Writer) (chaosConfig, error) {
	var c chaosConfig
	var scen string
	fs := newFlagSet("redfence chaos", chaosUsage, stderr)
	fs.StringVar(&c.backend, "backend", backendProcess, "where nodes run: process (local redis-server), docker (containers), or all (both; docker is skipped, loudly, only if `docker info` fails)")
	fs.StringVar(&scen, "scenario", "", "scenarios to run, comma-separated: a number (6 runs 6a, 6b, 6c) or a variant (6b); default all")
	fs.StringVar(&c.lock, "lock", "", "run only this lock: redlock or single (default: every lock a scenario applies to)")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the workload jitter and the random fault schedules; the same seed replays the same schedule")
	fs.DurationVar(&c.duration, "duration", chaos.DefaultScenarioDuration, "workload duration per scenario (some scenarios stretch it to fit their schedule)")
	fs.StringVar(&c.out, "out", "", "also write the results and the scenario descriptions as Markdown to this file (docs/chaos.md)")
	fs.StringVar(&c.artifacts, "artifacts", filepath.Join(os.TempDir(), "redfence-chaos"), "where a run that misses its expectation saves its history, porcupine timelines and seed")
	fs.StringVar(&c.redisServer, "redis-server", "", "redis-server executable (default $REDFENCE_REDIS_SERVER, else redis-server on PATH)")
	fs.DurationVar(&c.soak, "soak", 0, "instead of the scenarios, soak each lock for this long (e.g. 10m): random faults within what the lock tolerates, every check on (docs/chaos.md, Soak)")
	fs.BoolVar(&c.unsafe, "unsafe", false, "with -soak: also inject the faults the lock does not tolerate; double grants are then allowed, fenced violations are not")
	if err := parseNoArgs(fs, args); err != nil {
		return c, err
	}
	switch c.backend {
	case backendProcess, backendDocker, backendAll:
	default:
		return c, usageErrorf(fs, "-backend must be process, docker or all, got %q", c.backend)
	}
	switch c.lock {
	case "", chaos.LockRedlock, chaos.LockSingle:
	default:
		return c, usageErrorf(fs, "-lock must be redlock or single, got %q", c.lock)
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
	return c, c.checkSoakFlags(fs)
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
	results []chaos.Result
	elapsed time.Duration
}

// runChaosCommand implements "redfence chaos".
func runChaosCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseChaosFlags(args, stderr)
	if err != nil {
		return parseCode(err)
	}
	if cfg.soak > 0 {
		return runSoakCommand(ctx, cfg, stdout, stderr)
	}
	runs := cfg.plan()
	if len(runs) == 0 {
		fmt.Fprintf(stderr, "redfence chaos: no scenario among %q applies to lock %q\n", cfg.scenarios, cfg.lock)
		return exitUsage
	}
	bin, err := systemRedisFinder().find(ctx, cfg.redisServer, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "redfence chaos: %v\n", err)
		return failureCode(ctx)
	}
	backends, notes := chaosBackends(ctx, cfg.backend, stderr)
	// The faults are deliberate: go-redis's complaints about them (failed
	// dials, resets) are noise here. Its logger is process-wide: restore the
	// default one when done.
	redis.SetLogger(newDedupLogger(io.Discard))
	defer logging.Enable()

	start := time.Now()
	var done []backendRun
	failed := false
	for _, name := range backends {
		br, err := runBackend(ctx, name, bin, cfg, runs, stdout)
		if len(br.results) > 0 {
			done = append(done, br)
		}
		for _, r := range br.results {
			failed = failed || !r.Pass
		}
		if err != nil {
			fmt.Fprintf(stderr, "redfence chaos: %s backend: %v\n", name, err)
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
	if err := chaos.WriteTable(stdout, all); err != nil {
		fmt.Fprintf(stderr, "redfence chaos: %v\n", err)
		return exitFailure
	}
	for _, br := range done {
		fmt.Fprintf(stdout, "%s backend: %d runs in %v\n", br.name, len(br.results), br.elapsed.Round(time.Second))
	}
	if cfg.out != "" && len(all) > 0 {
		meta := chaosDocMeta{
			command:  "redfence chaos " + strings.Join(args, " "),
			seed:     cfg.seed,
			duration: cfg.duration,
			date:     start,
			backends: done,
			notes:    notes,
		}
		if err := writeChaosDocFile(cfg.out, meta, all); err != nil {
			fmt.Fprintf(stderr, "redfence chaos: %v\n", err)
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
		fmt.Fprintf(stderr, "\n!!! redfence chaos: %s !!!\n\n", msg)
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
func runBackend(ctx context.Context, name, bin string, cfg chaosConfig, runs []chaosRun, stdout io.Writer) (br backendRun, err error) {
	br.name = name
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
	opts := chaos.RunOptions{Seed: cfg.seed, Duration: cfg.duration, ArtifactsDir: cfg.artifacts}
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
		r.Backend, r.Scenario, r.Lock, verdict, took.Seconds(), r.Grants, r.DoubleGrants, r.FencedRejected, r.FencedViolations, r.LostUpdates, r.KeysLeft)
}

// chaosDocMeta is what the Markdown report says about how it was made.
type chaosDocMeta struct {
	command  string
	seed     int64
	duration time.Duration
	date     time.Time
	backends []backendRun
	notes    []string
}

// writeChaosDocFile writes the Markdown report to path.
func writeChaosDocFile(path string, meta chaosDocMeta, results []chaos.Result) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cErr := f.Close(); cErr != nil && err == nil {
			err = cErr
		}
	}()
	return writeChaosDoc(f, meta, results)
}

// writeChaosDoc writes docs/chaos.md: what the suite is, the measured
// table, and every scenario's steps, expectation and reason.
func writeChaosDoc(w io.Writer, meta chaosDocMeta, results []chaos.Result) error {
	var b strings.Builder
	b.WriteString(chaosDocIntro)
	b.WriteString("\n## Results\n\n")
	fmt.Fprintf(&b, "Generated by `%s` on %s (seed %d, %v of workload per scenario, %s/%s, %d CPUs, %s).\n",
		strings.TrimSpace(meta.command), meta.date.UTC().Format("2006-01-02 15:04 MST"), meta.seed, meta.duration,
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	for _, br := range meta.backends {
		fmt.Fprintf(&b, "The %s backend ran %d scenario runs in %v.\n", br.name, len(br.results), br.elapsed.Round(time.Second))
	}
	for _, n := range meta.notes {
		fmt.Fprintf(&b, "\n**%s**\n", n)
	}
	passed := 0
	for _, r := range results {
		if r.Pass {
			passed++
		}
	}
	fmt.Fprintf(&b, "\n%d of %d runs met their expectation.\n\n", passed, len(results))
	if err := chaos.WriteMarkdown(&b, results, ""); err != nil {
		return err
	}
	b.WriteString(chaosDocColumns)
	b.WriteString("\n## Scenarios\n")
	for _, sc := range chaos.Scenarios() {
		fmt.Fprintf(&b, "\n### %s. %s\n\n", sc.Name, sc.Title)
		fmt.Fprintf(&b, "Locks: %s.\n\n", strings.Join(sc.Locks, ", "))
		fmt.Fprintf(&b, "- **What it does.** %s\n", sc.Steps)
		fmt.Fprintf(&b, "- **Expected.** %s\n", sc.Expect)
		fmt.Fprintf(&b, "- **Why.** %s\n", sc.Why)
		for _, v := range sc.Variants {
			fmt.Fprintf(&b, "\n#### %s. %s\n\n", v.Name, v.Title)
			fmt.Fprintf(&b, "- **What it does.** %s\n", v.Steps)
			fmt.Fprintf(&b, "- **Expected.** %s\n", v.Expect)
			fmt.Fprintf(&b, "- **Why.** %s\n", v.Why)
		}
	}
	b.WriteString(chaosDocSoak)
	b.WriteString(chaosDocOutro)
	_, err := io.WriteString(w, b.String())
	return err
}

const chaosDocIntro = `# Chaos testing

<!-- Generated by "make chaos" (redfence chaos -out docs/chaos.md): edit
cmd/redfence/chaos.go and the scenarios in chaos/scenarios*.go, not this file. -->

redfence's locks are leases: they exclude only while their timing and
durability assumptions hold (docs/design.md), and fencing tokens make the
protected resource safe when they do not (docs/fencing.md). The chaos suite
checks both claims under faults, and shows where they end: every scenario
states its expected outcome, and the scenarios documented as unsafe provoke
the unsafe case with scripted steps and assert that it happens.

Run it with

` + "```sh" + `
make chaos                                      # both backends, rewrites this file
cd cmd/redfence && go run . chaos -backend process # local redis-server processes only
cd cmd/redfence && go run . chaos -scenario 8 -lock redlock -seed 7
` + "```" + `

` + "`redfence chaos -h`" + ` lists the flags. It exits non-zero when any run misses its
expectation, and saves that run's history (history.json), porcupine timelines
(mutex.html, register.html) and a summary with the seed under -artifacts.

## Setup of every run

- Fresh nodes per run, on the **process** backend (local redis-server
  processes: SIGKILL, SIGSTOP) or the **docker** backend (containers: docker
  kill, docker pause): 5 for redlock, 1 for single, plus one node for the
  fenced resource that no fault touches.
- Four clients. Each has its **own** redlock or single client over its **own**
  TCP proxies (toxiproxy, one per client and node), so faults can hit one
  client's view: cuts, blackholes, latency, connection resets, partitions.
- TTL 1s, per-node timeout 100ms, fencing on; go-redis clients with
  ContextTimeoutEnabled and no retries. redlock runs with the restart
  quarantine on at 2s (the 60s default scaled to the 1s TTL) and vouches for
  its brand-new nodes, unless a scenario turns the quarantine off.
- The workload (package chaos): each client loops acquire (one TryLock), a
  write to the **fenced resource** (a ` + "`fencing.RedisGuard`" + ` checking the lease's
  token) and a read, one read-modify-write increment of the **unfenced control**
  counter, a 10ms hold, release. Scripted clients act out the scenarios'
  stories on the same history.
- Every operation goes into one history on one monotonic clock, with faults as
  windows. The checks: overlapping believed-held intervals (acquire return to
  the earlier of ValidUntil and the release call) are **double grants**; the
  fenced writes are checked against what a correct guard must do; lost
  increments of the control; tokens (no repeats, increasing in real-time
  order); porcupine linearizability against a lease-mutex and a
  fenced-register model; lock keys left on the nodes a TTL after the run.

## Testing your own lock

Any lock with a TryLock method returning a lease with Token, ValidUntil and
Release plugs in with ` + "`chaos.Adapt`" + `, any other with ` + "`chaos.LockerFunc`" + `; drive it
with ` + "`chaos.Workload`" + ` over nodes from a backend (and a ` + "`chaos.Network`" + ` for
faults), then check the history with ` + "`chaos.Overlaps`" + `, ` + "`chaos.FencedViolations`" + `
and ` + "`chaos.NewResult`" + `. chaos/example_test.go does exactly that.
`

const chaosDocColumns = `
Columns: **grants** granted acquires; **double** double grants (overlapping
believed-held intervals); **fenced ok** / **stale** fenced writes accepted /
rejected as stale; **fenced viol** writes the guard got wrong; **lost upd**
increments the unfenced control lost; **p50/p99/max** acquire latency (one
attempt); **overran** acquires that returned later than their 1s deadline + the
100ms per-node timeout of the cleanup + 250ms of scheduling slack; **avail** share of 100ms windows with a grant; **recovery** time from the
heal to the next grant; **keys left** lock keys on running nodes a TTL after
the run; **linearizable** porcupine's verdict over both models (a violation is
expected where a double grant is); **pass** whether the scenario's own
expectation was met; **note** the expectation, what was seen, and what failed.
`

const chaosDocSoak = `
## Soak

The scenarios above are short scripted stories; the soak is the long
randomized run (issue 19). ` + "`redfence chaos -soak DURATION`" + ` runs, for each lock
(or ` + "`-lock`" + `) on each backend, the same setup as the scenarios (AOFAlways
nodes, four clients with their own proxied links, TTL 1s, fencing on, the
guard on a node no fault touches) for DURATION while a seeded nemesis starts a
fault every 200-500ms, each lasting 200-900ms: kill and restart, pause, a cut,
blackholed or resetting link from one client, latency from every client, and
for redlock FLUSHALL. Safe runs stay within what the lock tolerates
(docs/design.md, assumptions): redlock never disturbs more than a minority
(2 of 5 nodes) at once, and a restarted or wiped node counts as disturbed until
its restart quarantine ends; single has one fault at a time on its one node,
restarts only with persistence, no FLUSHALL; neither has clock jumps. With
` + "`-unsafe`" + ` the nemesis adds forward clock jumps and FLUSHALL for both locks, and lets
redlock disturb a majority (3 of 5): double grants are then allowed.

Checked over the whole history: no double grant (safe runs; Overlaps, exact);
no fenced-resource violation and tokens unique and increasing in real-time
order (every run); porcupine's mutex model over windows (safe runs); no lock
key left a TTL after the run; goroutines flat (the floor of the samples'
last half, after a warm-up quarter, within 50 or half of the first half's);
every node's used_memory within 8 MiB of its first sample (fence retention).
The windows: a lease (a granted acquire with the releases called before its
validity ends) spans its acquire's call to its validity's end and goes into
every 5s window it meets, so two leases that overlap are both in the window
holding the later one's grant, and no overlap is lost at a cut
(TestMutexWindowsAtTheCut, TestMutexWindowsAgreeWithOverlaps). The register
model is not windowed (its state is never forgotten): FencedViolations checks
the fenced resource exactly over the whole history instead. Lost updates of
the unfenced control and acquires past their deadline are reported, not
checked. Progress lines every 10s give operations, faults and the violations
so far; the summary table gives operations, grants, faults by kind, the most
nodes disturbed at once, violations, p50/p99 acquire latency, availability,
goroutines, heap and Redis memory. A run with a violation exits 1 and saves
history.json, the timelines of its first failing windows (window-N.html) and
summary.txt with the seed under -artifacts. ` + "`make soak`" + ` runs the safe then
the unsafe soak on both backends (SOAK_DURATION, default 10m per run;
SOAK_FLAGS); ` + "`make soak-smoke`" + ` runs 12s per run on the process backend, and CI
runs it. The measured figures are in docs/soak.md.
`

const chaosDocOutro = `
## What the suite shows, and what it cannot

- Within the lock's documented assumptions (a disturbed minority, no lost
  lock keys unless the restart quarantine covers them, clocks that do not
  jump) no run may show a double grant, and no run at all may show a
  fenced-resource violation or a token that repeats or goes down.
- The unsafe scenarios (6a, 7, 8, 14b, 14d) show the lock's assumptions are
  real: a node that forgets keys (a restart without persistence or from an
  older snapshot, a FLUSHALL), a failover to a replica, a clock jump each let
  two clients hold the lock. Fencing holds in every one of them: B's token is
  above A's and A's late write is rejected, also where the node that decided
  lost its fence counter (the clock floor, docs/fencing.md). The restart
  quarantine (6b, 14a, 14c) prevents the double grant itself.
- A paused or partitioned holder (4, 9) acts late whatever the lock does;
  the token check at the resource is what stops its write.
- Chaos runs sample behaviour; they do not prove it. The proofs and the
  exhaustive tests are in docs/design.md and docs/fencing.md.
`
