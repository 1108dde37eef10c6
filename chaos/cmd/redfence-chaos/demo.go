package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/internal/redisnode"
)

// Limits on the demo's flags, to catch typos before starting processes.
const (
	minDemoNodes   = 3 // one node is killed and a majority must remain
	maxDemoNodes   = 25
	maxDemoWorkers = 1000
	minDemoTTL     = 10 * time.Millisecond // redlock's minimum TTL
)

// demoConfig is the parsed command line of redfence-chaos demo.
type demoConfig struct {
	nodes       int
	workers     int
	duration    time.Duration
	ttl         time.Duration
	hold        time.Duration
	killAfter   time.Duration
	redisServer string            // -redis-server; empty: $REDFENCE_REDIS_SERVER, else PATH
	metricsAddr string            // -metrics-addr; empty: no metrics endpoint
	onMetrics   func(addr string) // tests: told the metrics address once it listens
}

// nodeTimeout is the per-node timeout of the demo's lock: min(50ms, TTL/10).
func (c demoConfig) nodeTimeout() time.Duration { return min(50*time.Millisecond, c.ttl/10) }

// lockTimeout bounds each Lock call of a worker.
func (c demoConfig) lockTimeout() time.Duration { return 2 * c.ttl }

// killedNode is the index of the node killed mid-run: always the last one,
// never node 0, which holds the counter.
func (c demoConfig) killedNode() int { return c.nodes - 1 }

const demoUsage = `Usage: redfence-chaos demo [flags]

Starts local redis-server nodes on free loopback ports, runs workers that
take turns holding one Redlock (Lock, read-modify-write a counter on node 0,
sleep -hold, Release), SIGKILLs the last node partway through, then reports
acquisitions, failures, overlapping holders, lost counter updates and acquire
latency. The nodes are always stopped, also on Ctrl-C. When redis-server is
missing it is installed with apt-get if running as root.

Exit status: 0 if no holders overlapped and no update was lost, 1 otherwise
or on error, 2 for bad flags, 130 when interrupted.
`

// parseDemoFlags parses the demo's arguments. Errors and -h output go to
// stderr; -h returns flag.ErrHelp.
func parseDemoFlags(args []string, stderr io.Writer) (demoConfig, error) {
	var c demoConfig
	fs := newFlagSet(prog+" demo", demoUsage, stderr)
	fs.IntVar(&c.nodes, "nodes", 5, fmt.Sprintf("number of local redis-server nodes to start (%d-%d)", minDemoNodes, maxDemoNodes))
	fs.IntVar(&c.workers, "workers", 4, "number of goroutines contending for the lock")
	fs.DurationVar(&c.duration, "duration", 6*time.Second, "how long the workers run")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "lock TTL (at least 10ms); the per-node timeout is min(50ms, ttl/10)")
	fs.DurationVar(&c.hold, "hold", 5*time.Millisecond, "time spent in the critical section, after the counter update")
	fs.DurationVar(&c.killAfter, "kill-after", 0, "when to SIGKILL the last node, from the start of the run (default duration/3)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve the lock's metrics in Prometheus format on this address (e.g. 127.0.0.1:9464) at /metrics while the demo runs")
	fs.StringVar(&c.redisServer, "redis-server", "", "redis-server executable (default $"+redisnode.EnvBinary+", else redis-server on PATH)")
	if err := parseNoArgs(fs, args); err != nil {
		return c, err
	}
	killSet := false
	fs.Visit(func(f *flag.Flag) { killSet = killSet || f.Name == "kill-after" })
	if !killSet {
		c.killAfter = c.duration / 3
	}
	switch {
	case c.nodes < minDemoNodes || c.nodes > maxDemoNodes:
		return c, usageErrorf(fs, "-nodes must be between %d and %d (one node is killed and a majority must remain), got %d", minDemoNodes, maxDemoNodes, c.nodes)
	case c.workers < 1 || c.workers > maxDemoWorkers:
		return c, usageErrorf(fs, "-workers must be between 1 and %d, got %d", maxDemoWorkers, c.workers)
	case c.duration <= 0:
		return c, usageErrorf(fs, "-duration must be positive, got %v", c.duration)
	case c.ttl < minDemoTTL:
		return c, usageErrorf(fs, "-ttl must be at least %v, got %v", minDemoTTL, c.ttl)
	case c.hold < 0:
		return c, usageErrorf(fs, "-hold must not be negative, got %v", c.hold)
	case c.killAfter < 0 || c.killAfter >= c.duration:
		return c, usageErrorf(fs, "-kill-after must be at least 0 and less than -duration (%v), got %v", c.duration, c.killAfter)
	}
	return c, nil
}

// runDemoCommand implements "redfence-chaos demo".
func runDemoCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseDemoFlags(args, stderr)
	if err != nil {
		return parseCode(err)
	}
	bin, err := systemRedisFinder().find(ctx, cfg.redisServer, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, prog+" demo: %v\n", err)
		return failureCode(ctx)
	}
	// go-redis logs every failed dial to the killed node; show each line once.
	// Its logger is process-wide: restore the default one when done.
	logger := newDedupLogger(stderr)
	redis.SetLogger(logger)
	defer logging.Enable()
	res, err := runDemo(ctx, cfg, bin, stdout)
	logger.Summary()
	if res != nil {
		writeReport(stdout, cfg, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, prog+" demo: %v\n", err)
	}
	switch {
	case res == nil || res.Interrupted:
		return failureCode(ctx)
	case err != nil || !res.ok():
		return exitFailure
	}
	return exitOK
}
