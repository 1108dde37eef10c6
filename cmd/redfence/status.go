package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redfence/redfence/redlock"
)

// statusNodeTimeout bounds the queries to one node in redfence status.
const statusNodeTimeout = 2 * time.Second

// statusConfig is the parsed command line of redfence status.
type statusConfig struct {
	conn       connConfig
	key        string // the full Redis key, prefix included
	quarantine time.Duration
}

// parseStatusFlags parses the arguments of redfence status, reading the
// environment with getenv. Errors and -h output go to stderr; -h returns
// flag.ErrHelp.
func parseStatusFlags(args []string, getenv func(string) string, stderr io.Writer) (statusConfig, error) {
	var c statusConfig
	var conn connFlags
	var key, prefix string
	fs := flag.NewFlagSet("redfence status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn.register(fs)
	fs.StringVar(&key, "key", "", "lock `name` (required)")
	fs.StringVar(&prefix, "prefix", "", "key `prefix`, as given to exec")
	fs.DurationVar(&c.quarantine, "quarantine", redlock.DefaultQuarantine, "restart quarantine the lock clients use, to compute each node's state (0: off)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: redfence status -key NAME [flags]

Shows, for each node: the lock's holder (the owner value stored in the
key, or -), its remaining TTL (PTTL), the key's fence counter (the last
fencing token issued, or -) and the node's restart-quarantine state:
  vouched                     vouched for in its current run
  ready                       the quarantine has passed
  quarantined, Ns left        refuses locks for N more seconds
  new or flushed: ...         no marker yet: it starts a quarantine on first use
  off                         -quarantine 0
  unreachable: <error>        the node did not answer
The state is computed as the lock clients do (by the node's clock and
uptime), for the -quarantine they use: pass -quarantine 0 for locks taken
with exec -single, whose quarantine is off by default. Each node is asked
in parallel, bounded by 2s. It only reads. Keys and values with spaces,
quotes or unprintable characters are printed quoted, as in "a b\n".

`+connUsage+`
Exit status: 0 if every node answered, 69 otherwise, 2 for a bad command
line, 130 when interrupted.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, usageErrorf(fs, "unexpected arguments: %q", fs.Args())
	case key == "":
		return c, usageErrorf(fs, "-key is required")
	case c.quarantine < 0:
		return c, usageErrorf(fs, "-quarantine must not be negative (0: off), got %v", c.quarantine)
	}
	var err error
	if c.conn, err = conn.resolve(getenv); err != nil {
		return c, usageErrorf(fs, "%v", err)
	}
	c.key = prefix + key
	return c, nil
}

// runStatusCommand implements "redfence status".
func runStatusCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseStatusFlags(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	logger := newDedupLogger(stderr)
	redis.SetLogger(logger)
	defer logging.Enable()
	defer logger.Summary()
	clients := cfg.conn.newClients()
	defer func() { _ = closeClients(clients) }() // best effort on the way out: the exit code is already decided

	statuses := make([]nodeStatus, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, statusNodeTimeout)
			defer cancel()
			statuses[i] = queryStatus(nctx, c, cfg.key, cfg.quarantine)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "redfence status: interrupted")
		return exitInterrupted
	}
	writeStatus(stdout, cfg, statuses)
	for _, s := range statuses {
		if s.err != nil {
			return exitUnavailable
		}
	}
	return exitOK
}

// nodeStatus is what one node says about a lock key and itself.
type nodeStatus struct {
	holder     string        // the key's value; "" when the key does not exist
	pttl       time.Duration // remaining TTL; negative: no expiry
	fence      string        // the fence counter; "" when there is none
	quarantine string        // the quarantine state, in words
	err        error         // the node could not be asked
}

// queryStatus reads the key, its TTL, its fence counter and the node's
// quarantine marker, run id, uptime and clock in one MULTI/EXEC, so that
// they are consistent.
func queryStatus(ctx context.Context, c redis.UniversalClient, key string, q time.Duration) nodeStatus {
	var (
		get    *redis.StringCmd
		pttl   *redis.DurationCmd
		fence  *redis.StringCmd
		marker *redis.SliceCmd
		info   *redis.StringCmd
		now    *redis.TimeCmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		fence = p.HGet(ctx, redlock.FenceKey(key), "t")
		marker = p.HMGet(ctx, redlock.MarkerKey, "ready_at", "vouched")
		info = p.Info(ctx, "server")
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nodeStatus{err: err}
	}
	var s nodeStatus
	if s.holder, err = get.Result(); err != nil && !errors.Is(err, redis.Nil) {
		return nodeStatus{err: fmt.Errorf("GET %s: %w", key, err)}
	}
	if s.pttl, err = pttl.Result(); err != nil {
		return nodeStatus{err: fmt.Errorf("PTTL %s: %w", key, err)}
	}
	if s.fence, err = fence.Result(); err != nil && !errors.Is(err, redis.Nil) {
		return nodeStatus{err: fmt.Errorf("HGET %s t: %w", redlock.FenceKey(key), err)}
	}
	m, err := marker.Result()
	if err != nil {
		return nodeStatus{err: fmt.Errorf("HMGET %s: %w", redlock.MarkerKey, err)}
	}
	if len(m) != 2 {
		return nodeStatus{err: fmt.Errorf("HMGET %s: %d values for 2 fields", redlock.MarkerKey, len(m))}
	}
	if err := info.Err(); err != nil {
		return nodeStatus{err: fmt.Errorf("INFO server: %w", err)}
	}
	runID, uptime, err := parseServerInfo(info.Val())
	if err != nil {
		return nodeStatus{err: fmt.Errorf("INFO server: %w", err)}
	}
	t, err := now.Result()
	if err != nil {
		return nodeStatus{err: fmt.Errorf("TIME: %w", err)}
	}
	readyAt, _ := m[0].(string)
	vouched, _ := m[1].(string)
	s.quarantine, err = quarantineState(readyAt, vouched, runID, uptime, t.UnixMilli(), q)
	if err != nil {
		return nodeStatus{err: err}
	}
	return s
}

// parseServerInfo returns run_id and uptime_in_seconds from INFO server.
func parseServerInfo(info string) (runID string, uptimeSec int64, err error) {
	var up string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			runID = v
		} else if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
			up = v
		}
	}
	if runID == "" || up == "" {
		return "", 0, errors.New("no run_id or uptime_in_seconds in the reply")
	}
	if uptimeSec, err = strconv.ParseInt(up, 10, 64); err != nil {
		return "", 0, fmt.Errorf("uptime_in_seconds %q: %w", up, err)
	}
	return runID, uptimeSec, nil
}

// quarantineState applies the acquire script's quarantine rule
// (internal/core/scripts/acquire.lua) to a node's marker fields readyAt and
// vouched ("" when absent), its run id, uptime in seconds and clock in ms,
// for quarantine q: a node vouched for in its current run votes; one
// without a marker starts its quarantine on first use; otherwise it sits
// out max(ready_at - now, q - uptime).
func quarantineState(readyAt, vouched, runID string, uptimeSec, nowMs int64, q time.Duration) (string, error) {
	switch {
	case vouched != "" && vouched == runID:
		return "vouched", nil
	case q == 0:
		return "off", nil
	case readyAt == "":
		return "new or flushed: quarantined on first use", nil
	}
	ready, err := strconv.ParseInt(readyAt, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s ready_at %q is not a number", redlock.MarkerKey, readyAt)
	}
	left := max(ready-nowMs, q.Milliseconds()-uptimeSec*1000)
	if left <= 0 {
		return "ready", nil
	}
	return fmt.Sprintf("quarantined, %ds left", (left+999)/1000), nil
}

// writeStatus writes the status table.
func writeStatus(w io.Writer, cfg statusConfig, statuses []nodeStatus) {
	q := "off"
	if cfg.quarantine > 0 {
		q = cfg.quarantine.String()
	}
	fmt.Fprintf(w, "key %s (fence key %s; quarantine %s)\n", cell(cfg.key), cell(redlock.FenceKey(cfg.key)), q)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDER\tTTL\tFENCE\tQUARANTINE")
	for i, s := range statuses {
		addr := cfg.conn.addrs[i]
		if s.err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tunreachable: %s\n", addr, escapeControls(s.err.Error()))
			continue
		}
		holder, ttl := "-", "-"
		if s.holder != "" {
			holder = cell(s.holder)
			switch {
			case s.pttl >= 0:
				ttl = s.pttl.String()
			case s.pttl == -1:
				ttl = "no expiry"
			}
		}
		fence := "-"
		if s.fence != "" {
			fence = cell(s.fence)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", addr, holder, ttl, fence, s.quarantine)
	}
	tw.Flush()
}

// cell returns s as it can stand in the output: unchanged when it is made
// of printable characters other than spaces, quotes and backslashes, else
// Go-quoted. Keys and values are anyone's bytes: a newline or tab must not
// add rows or columns, and a value must not pass for another ("-" is the
// sign for absent, so it is quoted too).
func cell(s string) string {
	if s == "" || s == "-" || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == '"' || r == '\\' {
			return strconv.Quote(s)
		}
	}
	return s
}

// escapeControls returns s with its control characters and invalid bytes
// escaped as in a Go string literal (\n, \t, \x1b), for free text such as
// an error message, which may quote a key.
func escapeControls(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
