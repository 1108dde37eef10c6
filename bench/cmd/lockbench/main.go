// Command lockbench measures redfence's locks against go-redsync/redsync and
// bsm/redislock on redis-server processes it starts and stops itself.
//
//	cd bench && go run ./cmd/lockbench                       # full run, table on stdout
//	cd bench && go run ./cmd/lockbench -out ../docs/performance.md
//	cd bench && go run ./cmd/lockbench -quick                # smoke run
//	cd bench && go run ./cmd/lockbench -link-latency 1ms     # then again over a link (root)
//
// Progress goes to stderr; the table to stdout. With -link-latency the
// scenarios run on loopback, then (those of -link-scenarios) with the
// nodes behind a link that adds the latency each way (package link, which
// needs root); without the privileges the link run is skipped, said so in
// the report and on stderr, and the command still succeeds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/redfence/redfence/bench/internal/link"
	"github.com/redfence/redfence/bench/internal/lockbench"
)

func main() {
	link.RunWireIfChild() // this program is also the link's wire
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the benchmark and writes the report; it returns the
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := lockbench.DefaultConfig()
	quick := fs.Bool("quick", false, "smoke run: every scenario and row with tiny durations (200ms, 1 round, unless -duration/-rounds/-warmup are given)")
	duration := fs.Duration("duration", def.Duration, "duration of one measurement")
	warmup := fs.Duration("warmup", def.Warmup, "unmeasured warm-up, once per library and scenario part")
	rounds := fs.Int("rounds", def.Rounds, "rounds per scenario; figures are medians over rounds")
	workers := fs.String("workers", joinInts(def.Workers), "comma-separated worker counts for scenarios 1, 2, 4, 6 and 7")
	cworkers := fs.Int("contended-workers", def.ContendedWorkers, "workers wanting the one key in scenario 3")
	hold := fs.Duration("hold", def.Hold, "how long a contended holder keeps the lock")
	bound := fs.Duration("wait-bound", def.WaitBound, "context bound of one contended acquisition; longer is a failure")
	allocCycles := fs.Int("alloc-cycles", def.AllocCycles, "cycles measured per round in scenario 5")
	pool := fs.Int("pool", def.PoolSize, "go-redis PoolSize of every client")
	nodeAge := fs.Duration("node-age", def.NodeAge, "wait until the 5 nodes are this old before the 5-node scenarios (past the 60s restart quarantine); 0: no wait")
	only := fs.String("only", "", "comma-separated scenarios to run (s1..s7); default all")
	linkLatency := fs.Duration("link-latency", 0, "after the loopback run, run the -link-scenarios again with the nodes behind a link that adds this much each way (a network namespace, TUN devices and a wire process: needs root; skipped, and said so, without it); 0: loopback only")
	linkOnly := fs.String("link-scenarios", strings.Join(lockbench.LinkScenarioIDs, ","), "comma-separated scenarios the link run may run (those -only selects)")
	rttPings := fs.Int("rtt-pings", def.RTTPings, "PINGs that measure the link's round trip, and loopback's (-quick: 100)")
	out := fs.String("out", "", "also write the report as Markdown to this file (e.g. ../docs/performance.md)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lockbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := def
	if *quick {
		cfg = lockbench.QuickConfig()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !*quick || set["duration"] {
		cfg.Duration = *duration
	}
	if !*quick || set["warmup"] {
		cfg.Warmup = *warmup
	}
	if !*quick || set["rounds"] {
		cfg.Rounds = *rounds
	}
	if !*quick || set["node-age"] {
		cfg.NodeAge = *nodeAge
	}
	if !*quick || set["alloc-cycles"] {
		cfg.AllocCycles = *allocCycles
	}
	if !*quick || set["rtt-pings"] {
		cfg.RTTPings = *rttPings
	}
	cfg.LinkLatency = *linkLatency
	if *linkOnly != "" {
		cfg.LinkOnly = strings.Split(*linkOnly, ",")
	}
	ws, err := parseInts(*workers)
	if err != nil {
		fmt.Fprintf(stderr, "lockbench: -workers: %v\n", err)
		return 2
	}
	cfg.Workers = ws
	cfg.ContendedWorkers = *cworkers
	cfg.Hold = *hold
	cfg.WaitBound = *bound
	cfg.PoolSize = *pool
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	cfg.Command = commandLine(args)
	if !*quiet {
		cfg.Progress = stderr
	}

	rep, err := lockbench.Run(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "lockbench: interrupted; nodes stopped")
			return 130
		}
		fmt.Fprintf(stderr, "lockbench: %v\n", err)
		return 1
	}
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "lockbench: %v\n", err)
		return 1
	}
	if *out != "" {
		if err := writeFile(*out, rep); err != nil {
			fmt.Fprintf(stderr, "lockbench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "lockbench: wrote %s\n", *out)
	}
	if rep.LinkSkipped != nil {
		// Said even with -q: the report lacks a part that was asked for.
		fmt.Fprintf(stderr, "lockbench: the run over the link was skipped: %v\n", rep.LinkSkipped)
	}
	if rep.LinkFailed() {
		return 1
	}
	return 0
}

func writeFile(path string, rep *lockbench.Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".performance-*.md")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := rep.WriteMarkdown(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// commandLine is the command as run from the bench directory.
func commandLine(args []string) string {
	parts := []string{"go run ./cmd/lockbench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\|&;<>()*?") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("invalid worker count %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no worker counts")
	}
	return out, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
