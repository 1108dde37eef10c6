package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/redfence/redfence/redlock"
)

// Defaults and internal bounds of redfence exec.
const (
	defaultExecTTL = 10 * time.Second
	// maxDefaultGrace caps the default -grace, ttl/5: the time a command
	// has to stop between the loss of the lock and the end of its validity.
	maxDefaultGrace = 5 * time.Second
	// vouchTimeout bounds -vouch.
	vouchTimeout = 5 * time.Second
	// groupPollInterval is how often stopGroup checks whether processes
	// are left in the command's group after the command itself exited.
	groupPollInterval = 20 * time.Millisecond
)

// Environment variables set for the command.
const (
	envKey   = "REDFENCE_KEY"
	envToken = "REDFENCE_TOKEN"
)

// execConfig is the parsed command line of redfence exec.
type execConfig struct {
	conn          connConfig
	key           string
	prefix        string
	ttl           time.Duration
	wait          time.Duration
	grace         time.Duration
	quarantine    time.Duration
	quarantineSet bool // -quarantine was given; otherwise the library default applies
	fencing       bool
	single        bool
	vouch         bool
	argv          []string // the command and its arguments
}

// settings returns the lock options of the configuration.
func (c execConfig) settings() lockSettings {
	return lockSettings{
		ttl:           c.ttl,
		fencing:       c.fencing,
		prefix:        c.prefix,
		quarantine:    c.quarantine,
		quarantineSet: c.quarantineSet,
	}
}

const execUsage = `Usage: redfence exec [flags] -- command [args...]

Takes the lock -key on the nodes, runs the command while keeping the lock
alive (it is extended about every ttl/3), and releases the lock when the
command exits. The command gets redfence's environment, stdin, stdout and
stderr, plus
  REDFENCE_KEY    the lock's full Redis key (-prefix included)
  REDFENCE_TOKEN  the lease's fencing token; 0 without -fencing
It runs in its own process group, so signals from redfence reach the
processes it starts too. That group is not the terminal's foreground
group: a command that reads from the terminal is stopped (SIGTTIN), so
give it its input from a pipe or a file.

If the lock is lost while the command runs (the nodes stopped confirming
it, and its validity is about to end), redfence prints
  redfence: lock lost: <reason>; stopping the command
sends SIGTERM to the command's process group, SIGKILL after -grace, and
exits 75. On SIGINT, SIGTERM, SIGHUP or SIGQUIT it sends SIGTERM to the
command's group, waits for it (SIGKILL after -grace), releases the lock
and exits 130. If redfence itself is killed (SIGKILL), on Linux the command
gets SIGKILL at once; the processes it started live on, unlocked.

Brand-new Redlock nodes refuse locks for one quarantine period (60s) until
vouched for: pass -vouch the first time, and only for a brand-new set of
nodes, or run "redfence nodes vouch" once. Never vouch for nodes that
restarted or were flushed while locks may have been held.

` + connUsage + `
Exit status:
  N    the command's exit status; 128+S when signal S killed it
  2    bad command line
  69   not acquired: nodes unreachable, quarantined or failing (or -vouch failed)
  73   not acquired: the lock is held by another owner
  75   the lock was lost while the command ran; the command was stopped
  126  the command could not be started
  127  the command was not found
  130  interrupted: the command was stopped and the lock released
A command that itself exits with one of these codes is indistinguishable
from redfence's own; redfence explains its own on stderr. "go run" turns
every non-zero status into 1: run a built binary to see these codes.
`

// parseExecFlags parses the arguments of redfence exec, reading the
// environment with getenv. Errors and -h output go to stderr; -h returns
// flag.ErrHelp.
func parseExecFlags(args []string, getenv func(string) string, stderr io.Writer) (execConfig, error) {
	var c execConfig
	var conn connFlags
	fs := newFlagSet("redfence exec", execUsage, stderr)
	conn.register(fs)
	fs.StringVar(&c.key, "key", "", "lock `name` (required); the Redis key is -prefix followed by it")
	fs.StringVar(&c.prefix, "prefix", "", "key `prefix`")
	fs.DurationVar(&c.ttl, "ttl", defaultExecTTL, "lock TTL: how long the lock outlives redfence if it dies; it is extended about every ttl/3")
	fs.DurationVar(&c.wait, "wait", 0, "how long to wait for the lock: 0 makes a single attempt; otherwise attempts back off from 20ms to 500ms, the last one at the deadline")
	fs.BoolVar(&c.fencing, "fencing", false, "issue a fencing token (REDFENCE_TOKEN > 0, increasing with every acquisition of the key)")
	fs.DurationVar(&c.quarantine, "quarantine", 0, "restart quarantine, at least -ttl; 0 turns it off (default 60s, the Redlock default; off with -single)")
	fs.BoolVar(&c.single, "single", false, "use the single-node lock (package single) on the one node in -nodes instead of Redlock")
	fs.DurationVar(&c.grace, "grace", 0, "after SIGTERM, how long the command has to exit before SIGKILL; shorter than -ttl; on loss, keep it under ttl/5 so the command stops while the lock is still valid (default ttl/5, at most 5s)")
	fs.BoolVar(&c.vouch, "vouch", false, "vouch for the nodes before acquiring (ONLY for a brand-new set of nodes; see \"redfence nodes vouch -h\")")
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	graceSet := false
	fs.Visit(func(f *flag.Flag) {
		c.quarantineSet = c.quarantineSet || f.Name == "quarantine"
		graceSet = graceSet || f.Name == "grace"
	})
	if !graceSet {
		c.grace = min(c.ttl/5, maxDefaultGrace)
	}
	c.argv = fs.Args()
	switch {
	case c.key == "":
		return c, usageErrorf(fs, "-key is required")
	case len(c.argv) == 0:
		return c, usageErrorf(fs, "no command given: redfence exec [flags] -- command [args...]")
	case c.ttl <= 0:
		return c, usageErrorf(fs, "-ttl must be positive, got %v", c.ttl)
	case c.wait < 0:
		return c, usageErrorf(fs, "-wait must not be negative, got %v", c.wait)
	case c.grace < 0:
		return c, usageErrorf(fs, "-grace must not be negative, got %v", c.grace)
	case c.grace >= c.ttl:
		return c, usageErrorf(fs, "-grace (%v) must be shorter than -ttl (%v): once the lock is lost, the command has about ttl/5 to stop before another client can take the lock", c.grace, c.ttl)
	case c.quarantine < 0:
		return c, usageErrorf(fs, "-quarantine must not be negative (0 turns it off), got %v", c.quarantine)
	}
	var err error
	if c.conn, err = conn.resolve(getenv); err != nil {
		return c, usageErrorf(fs, "%v", err)
	}
	if c.single && len(c.conn.addrs) != 1 {
		return c, usageErrorf(fs, "-single uses exactly one node, but %d are given", len(c.conn.addrs))
	}
	return c, nil
}

// runExecCommand implements "redfence exec".
func runExecCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseExecFlags(args, os.Getenv, stderr)
	if err != nil {
		return parseCode(err)
	}
	return execute(ctx, cfg, os.Stdin, stdout, stderr)
}

// execute takes the lock, runs the command under it and returns the exit
// code. It stops everything it started before returning.
func execute(ctx context.Context, cfg execConfig, stdin io.Reader, stdout, stderr io.Writer) int {
	if !processGroupsSupported {
		fmt.Fprintln(stderr, "redfence exec: not supported on this platform: it needs Unix process groups")
		return exitFailure
	}
	// Find the command before taking the lock: a typo must not take it.
	path, err := exec.LookPath(cfg.argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "redfence exec: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	s := cfg.settings()
	s.retry = waitPolicy(cfg.wait)
	return withLocker(cfg.conn, cfg.single, s, cfg.key, "redfence exec", stderr, func(lk *locker) int {
		warmUp(ctx, lk.Clients())
		if cfg.vouch {
			if code, ok := vouch(ctx, lk, stderr); !ok {
				return code
			}
		}
		c := child{cfg: cfg, path: path, stdin: stdin, stdout: stdout, stderr: stderr}
		return c.runLocked(ctx, lk)
	})
}

// vouch vouches for the nodes (-vouch), bounded by vouchTimeout; on failure
// it explains why and returns the exit code and false.
func vouch(ctx context.Context, lk *locker, stderr io.Writer) (int, bool) {
	vctx, cancel := context.WithTimeout(ctx, vouchTimeout)
	err := lk.Vouch(vctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "redfence exec: interrupted while vouching for the nodes")
		return exitInterrupted, false
	case err != nil:
		fmt.Fprintf(stderr, "redfence exec: vouching for the nodes: %v\n", err)
		if errors.Is(err, redlock.ErrNotNew) {
			fmt.Fprintln(stderr, notNewAdvice("redfence exec"))
		}
		return exitUnavailable, false
	}
	return exitOK, true
}

// waitPolicy is the retry policy of -wait for Mutex.Lock: one attempt when
// wait is 0; otherwise the library's default back-off (20ms growing to
// 500ms, jittered) until wait has passed since the first attempt, the last
// one at the deadline. Unlike a context deadline, the deadline never cuts an
// attempt short: each runs to completion, bounded by the per-node timeout,
// so the last error says whether another owner holds the lock or the nodes
// failed. ctx (an interrupt) does cut it short.
func waitPolicy(wait time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return &deadlineBackOff{b: defaultRetry(), wait: wait} }
}

// defaultRetry is the library's default retry policy (redlock.WithRetry):
// 20ms, growing by 1.6x up to 500ms, each delay randomised by +-50%.
func defaultRetry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.MaxInterval = 20*time.Millisecond, 1.6, 500*time.Millisecond
	b.RandomizationFactor, b.MaxElapsedTime = 0.5, 0
	b.Reset()
	return b
}

// deadlineBackOff is b until wait has passed since Reset, every delay cut to
// end at that deadline at the latest.
type deadlineBackOff struct {
	b        backoff.BackOff
	wait     time.Duration
	deadline time.Time
}

// Reset starts the wait; Mutex.Lock calls it before its first attempt.
func (d *deadlineBackOff) Reset() {
	d.b.Reset()
	d.deadline = time.Now().Add(d.wait)
}

// NextBackOff returns b's next delay, cut to the time left, or backoff.Stop
// once the deadline has passed.
func (d *deadlineBackOff) NextBackOff() time.Duration {
	left := time.Until(d.deadline)
	if left <= 0 {
		return backoff.Stop
	}
	if n := d.b.NextBackOff(); n != backoff.Stop && n < left {
		return n
	}
	return left
}

// quarantineHint explains an acquire refused by nodes in restart
// quarantine. Vouching is suggested only when no node reported the key
// held: a node that did shows that the set is in use, and that the
// quarantined nodes may have forgotten a lock still held (a restart without
// persistence, a FLUSHALL); vouching for them would grant it a second time.
func quarantineHint(err error) string {
	if errors.Is(err, redlock.ErrTaken) {
		return "redfence exec: some nodes are in restart quarantine while others report the key held by another owner: " +
			"the quarantined nodes may have lost their data while the lock is held. Do not vouch for them; " +
			"the quarantine ends by itself"
	}
	return "redfence exec: nodes in restart quarantine refuse locks until it ends; " +
		"for a brand-new set of nodes, and only then, vouch for them with -vouch or \"redfence nodes vouch\""
}

// notNewAdvice explains a vouch refused because a node showed it was in
// use, for the command name cmd.
func notNewAdvice(cmd string) string {
	return cmd + ": vouching was refused, for no node: a node shows that the set is not brand-new, " +
		"so the nodes without a marker may have lost the keys of locks still held. " +
		"Let the restart quarantine run out instead (60s by default); it ends by itself"
}

// classifyAcquireError returns the exit code for a failed acquire on n
// nodes, and words for it. It is exitLockHeld when nodes said that another
// owner holds the key and either no node failed otherwise, or those refusals
// alone left no majority (so the failures did not matter); else
// exitUnavailable.
func classifyAcquireError(err error, n int) (code int, what string) {
	var qe *redlock.QuorumError
	if errors.As(err, &qe) && qe.Op == "acquire" {
		taken := 0
		for _, ne := range qe.Nodes {
			if errors.Is(ne.Err, redlock.ErrTaken) {
				taken++
			}
		}
		failed := len(qe.Nodes) - taken
		if taken > 0 && (failed == 0 || taken > n-qe.Need) {
			return exitLockHeld, "is held by another owner"
		}
	}
	return exitUnavailable, "was not acquired"
}
