package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redfence/redfence/redlock"
)

// nodesNodeTimeout bounds each node's check or vouch in redfence nodes.
const nodesNodeTimeout = 2 * time.Second

// nodesSubcommands are the subcommands of redfence nodes.
var nodesSubcommands = map[string]command{
	"check": {
		summary: "report each node's persistence, eviction and replication settings and the risks they carry",
		run:     runNodesCheck,
	},
	"vouch": {
		summary: "mark brand-new nodes as trustworthy, ending their restart quarantine (ONLY for new nodes)",
		run:     runNodesVouch,
	},
}

// runNodesCommand implements "redfence nodes": it dispatches to check or
// vouch; help and -h print its usage to stderr.
func runNodesCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "redfence nodes", "subcommand", nodesSubcommands, printNodesUsage,
		func(_ context.Context, _ []string, _, stderr io.Writer) int {
			printNodesUsage(stderr)
			return exitOK
		}, args, stdout, stderr)
}

// printNodesUsage writes the usage of redfence nodes to w.
func printNodesUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: redfence nodes <subcommand> [flags]

Subcommands:
`)
	writeCommandList(w, nodesSubcommands)
	fmt.Fprint(w, "\nRun \"redfence nodes <subcommand> -h\" for its flags and exit codes.\n"+
		"Exit status: that of the subcommand; 2 for a missing or unknown subcommand.\n")
}

// parseNodesFlags parses the flags shared by nodes check and nodes vouch
// (only the connection flags); usage describes the subcommand.
func parseNodesFlags(name, usage string, args []string, getenv func(string) string, stderr io.Writer) (connConfig, error) {
	var conn connFlags
	fs := newFlagSet("redfence nodes "+name, usage+"\n"+connUsage, stderr)
	conn.register(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return connConfig{}, err
	}
	c, err := conn.resolve(getenv)
	if err != nil {
		return c, usageErrorf(fs, "%v", err)
	}
	return c, nil
}

// withNodesLocker parses the flags, connects to the nodes and calls fn with
// a locker over them (redlock with the quarantine off, so that any set of
// nodes works; single for one node), cleaning everything up afterwards.
func withNodesLocker(name, usage string, args []string, stderr io.Writer, fn func(lk *locker, addrs []string) int) int {
	conn, err := parseNodesFlags(name, usage, args, os.Getenv, stderr)
	if err != nil {
		return parseCode(err)
	}
	s := lockSettings{nodeTimeout: nodesNodeTimeout, quarantineSet: true}
	return withLocker(conn, len(conn.addrs) == 1, s, "", "redfence nodes "+name, stderr, func(lk *locker) int {
		return fn(lk, conn.addrs)
	})
}

// runNodes runs a nodes subcommand: op on a locker over the nodes, then
// report on its result, unless ctx ended meanwhile: then it says the run
// was interrupted (and note, what that leaves) and exits 130.
func runNodes[T any](ctx context.Context, name, usage, note string, args []string, stderr io.Writer,
	op func(*locker, context.Context) T, report func(res T, addrs []string) int,
) int {
	return withNodesLocker(name, usage, args, stderr, func(lk *locker, addrs []string) int {
		res := op(lk, ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "redfence nodes %s: interrupted%s\n", name, note)
			return exitInterrupted
		}
		return report(res, addrs)
	})
}

const nodesCheckUsage = `Usage: redfence nodes check [flags]

Asks every node (a script reading the run id, CONFIG GET, INFO replication,
TIME; bounded by 2s each) for its role, appendonly, appendfsync, maxmemory, maxmemory-policy, replicas and
clock, and lists each setting that still lets the lock grant a second holder
or a fencing token repeat, with what to do: appendonly off or appendfsync
other than always (lock keys lost on a restart; these nodes are checked as
for a lock without the restart quarantine, which covers them), an eviction
policy (lock keys and fence hashes evicted), a replica role, asynchronous
replicas (a failover can lose a lock key), a clock more than 500ms off this
machine's (fencing tokens assume clocks within 1s of true time). A lost fence
counter alone is no longer a risk: tokens never go below the node's clock
(docs/fencing.md). The last line sums it up.

Exit status:
  0    every node was checked and showed no risk
  1    risks were found (and every node was checked)
  2    bad command line
  69   a node could not be checked (unreachable, or CONFIG disabled)
  130  interrupted
`

// runNodesCheck implements "redfence nodes check".
func runNodesCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runNodes(ctx, "check", nodesCheckUsage, "", args, stderr, (*locker).CheckNodes,
		func(checks []redlock.NodeCheck, addrs []string) int {
			writeChecks(stdout, addrs, checks)
			return checksCode(checks)
		})
}

// writeChecks writes each node's settings and risks, then the verdict.
func writeChecks(w io.Writer, addrs []string, checks []redlock.NodeCheck) {
	risky, failed := 0, 0
	for i, c := range checks {
		fmt.Fprintf(w, "%s\n", addrs[i])
		if c.Err != nil {
			failed++
			fmt.Fprintf(w, "  could not check: %v\n\n", c.Err)
			continue
		}
		mm := "0 (no limit)"
		if c.Maxmemory > 0 {
			mm = fmt.Sprintf("%d bytes", c.Maxmemory)
		}
		fmt.Fprintf(w, "  role:             %s\n", c.Role)
		fmt.Fprintf(w, "  appendonly:       %s\n", c.AppendOnly)
		fmt.Fprintf(w, "  appendfsync:      %s\n", c.AppendFsync)
		fmt.Fprintf(w, "  maxmemory:        %s\n", mm)
		fmt.Fprintf(w, "  maxmemory-policy: %s\n", c.MaxmemoryPolicy)
		fmt.Fprintf(w, "  replicas:         %d (%d online, longest lag %v)\n", c.Replicas, c.OnlineReplicas, c.ReplicaLag)
		fmt.Fprintf(w, "  clock offset:     %v\n", c.ClockOffset)
		if len(c.Risks) == 0 {
			fmt.Fprintln(w, "  no risk found")
		} else {
			risky++
		}
		for _, r := range c.Risks {
			fmt.Fprintf(w, "  RISK: %s\n", r)
		}
		fmt.Fprintln(w)
	}
	n := len(checks)
	switch {
	case risky > 0:
		fmt.Fprintf(w, "AT RISK: %d of %d nodes have a setting that lets the lock grant a second holder or a token repeat (see each RISK)%s\n",
			risky, n, uncheckedSuffix(failed))
	case failed > 0:
		fmt.Fprintf(w, "UNKNOWN: %d of %d nodes could not be checked\n", failed, n)
	default:
		fmt.Fprintf(w, "no risk found: all %d nodes checked\n", n)
	}
}

// uncheckedSuffix mentions the nodes that could not be checked, if any.
func uncheckedSuffix(failed int) string {
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf(", and %d could not be checked", failed)
}

// checksCode is the exit code of nodes check: exitUnavailable if a node
// could not be checked, else exitFailure if a node has risks, else exitOK.
func checksCode(checks []redlock.NodeCheck) int {
	code := exitOK
	for _, c := range checks {
		switch {
		case c.Err != nil:
			return exitUnavailable
		case len(c.Risks) > 0:
			code = exitFailure
		}
	}
	return code
}

const nodesVouchUsage = `Usage: redfence nodes vouch [flags]

WARNING: only for a BRAND-NEW set of nodes, which cannot have forgotten a
lock because none was ever taken on them. Vouching for a node that
restarted or was flushed while locks may have been held switches off the
very protection the restart quarantine gives: a second client could then
take a lock that is still held.

Marks every node as trustworthy for its current run (the marker key
redfence:node records its run id), so that the restart quarantine does not
hold it back; a restart ends it. Without vouching, new nodes refuse locks
for one quarantine period (Redlock's default: 60s). Each node is bounded
by 2s.

It refuses, and vouches for no node, unless every node answers and none
shows it was in use: a node that holds any key besides its marker (a lock
key, a fence hash, other data) or was vouched for in an earlier run shows
that the set is not brand-new. Nodes already vouched for in their current
run are left as they are.

Exit status:
  0    every node was vouched for
  2    bad command line
  69   a node could not be vouched for: if one could not be asked or showed
       use, none was; otherwise the others were
  130  interrupted
`

// runNodesVouch implements "redfence nodes vouch".
func runNodesVouch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runNodes(ctx, "vouch", nodesVouchUsage, "; some nodes may have been vouched for", args, stderr, (*locker).Vouch,
		func(err error, addrs []string) int { return reportVouch(stdout, stderr, addrs, err) })
}

// reportVouch says which of addrs were vouched for, given Vouch's err, and
// returns the exit code.
func reportVouch(stdout, stderr io.Writer, addrs []string, err error) int {
	failed := map[int]error{}
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		for _, ne := range qe.Nodes {
			failed[ne.Index] = ne.Err
		}
	} else if err != nil {
		fmt.Fprintf(stderr, "redfence nodes vouch: %v\n", err)
		return exitUnavailable
	}
	var ok []string
	for i, a := range addrs {
		if ferr, bad := failed[i]; bad {
			fmt.Fprintf(stdout, "%s: NOT vouched for: %v\n", a, ferr)
		} else {
			ok = append(ok, a)
			fmt.Fprintf(stdout, "%s: vouched for until it restarts\n", a)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "redfence nodes vouch: %d of %d nodes could not be vouched for\n", len(failed), len(addrs))
		if errors.Is(err, redlock.ErrNotNew) {
			fmt.Fprintln(stderr, notNewAdvice("redfence nodes vouch"))
		}
		return exitUnavailable
	}
	fmt.Fprintf(stdout, "vouched for all %d nodes (%s): the restart quarantine no longer holds them back in their current run\n",
		len(addrs), strings.Join(ok, ", "))
	return exitOK
}
