package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

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

const statusUsage = `Usage: redfence status -key NAME [flags]

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

` + connUsage + `
Exit status: 0 if every node answered, 69 otherwise, 2 for a bad command
line, 130 when interrupted.
`

// parseStatusFlags parses the arguments of redfence status, reading the
// environment with getenv. Errors and -h output go to stderr; -h returns
// flag.ErrHelp.
func parseStatusFlags(args []string, getenv func(string) string, stderr io.Writer) (statusConfig, error) {
	var c statusConfig
	var conn connFlags
	var key, prefix string
	fs := newFlagSet("redfence status", statusUsage, stderr)
	conn.register(fs)
	fs.StringVar(&key, "key", "", "lock `name` (required)")
	fs.StringVar(&prefix, "prefix", "", "key `prefix`, as given to exec")
	fs.DurationVar(&c.quarantine, "quarantine", 60*time.Second, "restart quarantine the lock clients use, to compute each node's state (0: off)")
	if err := parseNoArgs(fs, args); err != nil {
		return c, err
	}
	switch {
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

// runStatusCommand implements "redfence status" with Client.Inspect.
func runStatusCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseStatusFlags(args, os.Getenv, stderr)
	if err != nil {
		return parseCode(err)
	}
	// The client's quarantine is -quarantine, under which Inspect judges each
	// node's marker; it only reads, so its TTL only has to fit under it.
	s := lockSettings{nodeTimeout: statusNodeTimeout, quarantineSet: true, quarantine: cfg.quarantine}
	if cfg.quarantine > 0 && cfg.quarantine < statusTTL {
		s.ttl = cfg.quarantine
	}
	return withLocker(cfg.conn, false, s, "", "redfence status", stderr, func(lk *locker) int {
		ins, err := lk.Inspect(ctx, cfg.key)
		switch {
		case ctx.Err() != nil:
			fmt.Fprintln(stderr, "redfence status: interrupted")
			return exitInterrupted
		case err != nil:
			fmt.Fprintf(stderr, "redfence status: %v\n", err)
			return exitUsage
		}
		writeStatus(stdout, cfg, ins)
		for _, n := range ins.Nodes {
			if n.Err != nil {
				return exitUnavailable
			}
		}
		return exitOK
	})
}

// statusTTL is the TTL status's client has by default (the library's).
const statusTTL = 8 * time.Second

// quarantineState says in words where node n stands in the restart
// quarantine q (0: off), which Inspect judged it by.
func quarantineState(n redlock.NodeState, q time.Duration) string {
	switch {
	case n.Quarantine.Cluster:
		return "none (Redis Cluster)"
	case n.Quarantine.Vouched:
		return "vouched"
	case q == 0:
		return "off"
	case !n.Quarantine.Marked:
		return "new or flushed: quarantined on first use"
	}
	left := n.Quarantine.Left
	if left <= 0 {
		return "ready"
	}
	return fmt.Sprintf("quarantined, %ds left", (left.Milliseconds()+999)/1000)
}

// writeStatus writes the status table.
func writeStatus(w io.Writer, cfg statusConfig, ins *redlock.Inspection) {
	q := "off"
	if cfg.quarantine > 0 {
		q = cfg.quarantine.String()
	}
	fmt.Fprintf(w, "key %s (fence key %s; quarantine %s)\n", cell(ins.Key), cell(ins.FenceKey), q)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDER\tTTL\tFENCE\tQUARANTINE")
	for i, n := range ins.Nodes {
		addr := cfg.conn.addrs[i]
		if n.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tunreachable: %s\n", addr, escapeControls(n.Err.Error()))
			continue
		}
		holder, ttl, fence := "-", "-", "-"
		if n.Holder != "" {
			holder, ttl = cell(n.Holder), "no expiry"
			if n.TTL >= 0 {
				ttl = n.TTL.String()
			}
		}
		if n.Token > 0 {
			fence = n.Token.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", addr, holder, ttl, fence, quarantineState(n, cfg.quarantine))
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
