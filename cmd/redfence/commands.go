package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// Exit codes shared by all commands. The 64-78 range follows BSD's
// sysexits.h, so that scripts can tell outcomes apart.
const (
	exitOK          = 0   // the command did what it was asked and found nothing wrong
	exitFailure     = 1   // the command failed or found a problem
	exitUsage       = 2   // bad command line
	exitUnavailable = 69  // EX_UNAVAILABLE: nodes unreachable, quarantined or failing
	exitLockHeld    = 73  // EX_CANTCREAT: the lock is held by another owner
	exitLockLost    = 75  // EX_TEMPFAIL: the lock was lost while the command ran
	exitCannotRun   = 126 // the command was found but could not be started
	exitNotFound    = 127 // the command was not found
	exitInterrupted = 130 // SIGINT, SIGTERM, SIGHUP or SIGQUIT cancelled the command
)

// command is one redfence subcommand.
type command struct {
	// summary is a one-line description for the command list.
	summary string
	// run executes the command with the arguments after its name and returns
	// the process exit code. It must stop everything it started before it
	// returns, including when ctx is cancelled. Given -h it prints its flags
	// to stderr and returns exitOK.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists every subcommand by name. A new subcommand lives in its own
// file and adds one entry here.
var commands = map[string]command{
	"exec": {
		summary: "run a command while holding a lock, keeping it alive; stop the command if the lock is lost",
		run:     runExecCommand,
	},
	"status": {
		summary: "show a lock's holder, TTL and fence counter, and each node's quarantine state",
		run:     runStatusCommand,
	},
	"nodes": {
		summary: "check nodes for settings that can lose acknowledged writes (check), or vouch for new nodes (vouch)",
		run:     runNodesCommand,
	},
	"version": {
		summary: "print the module version this binary was built from",
		run:     runVersionCommand,
	},
}

// movedCommands names the commands that left redfence for the chaos
// module's binary, so that an old command line gets a pointer instead of a
// bare "unknown command".
var movedCommands = map[string]string{
	"chaos": "scenarios (and soak for chaos -soak)",
	"demo":  "demo",
	"soak":  "soak",
}

// run dispatches args (without the program name) to a subcommand and returns
// the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "redfence", "command", commands, printUsage, runHelp, args, stdout, stderr)
}

// dispatch runs the command of cmds that args[0] names with the rest of
// args, or help with the rest for help, -h, -help or --help. prog and noun
// word its errors ("redfence: no command given"); a missing or unknown name
// prints usage to stderr and returns exitUsage.
func dispatch(ctx context.Context, prog, noun string, cmds map[string]command, usage func(io.Writer),
	help func(ctx context.Context, args []string, stdout, stderr io.Writer) int, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: no %s given\n", prog, noun)
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(ctx, rest, stdout, stderr)
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown %s %q\n", prog, noun, name)
		if to, moved := movedCommands[name]; moved && prog == "redfence" {
			fmt.Fprintf(stderr, "%s: %s moved to the chaos module's binary: redfence-chaos %s (docs/cli.md, The redfence-chaos command)\n", prog, name, to)
		}
		usage(stderr)
		return exitUsage
	}
	return cmd.run(ctx, rest, stdout, stderr)
}

// runHelp prints the command list, or with one argument that command's flags,
// to stdout.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		printUsage(stdout)
		return exitOK
	case 1:
		cmd, ok := commands[args[0]]
		if !ok {
			fmt.Fprintf(stderr, "redfence help: unknown command %q\n", args[0])
			printUsage(stderr)
			return exitUsage
		}
		// A command prints its flags to its stderr on -h; help goes to stdout.
		return cmd.run(ctx, []string{"-h"}, stdout, stdout)
	default:
		fmt.Fprintln(stderr, "redfence help: want at most one command name")
		return exitUsage
	}
}

// printUsage writes the program's usage and the sorted command list to w.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `redfence: tools for the redfence distributed locks

Usage:
  redfence <command> [flags]

Commands:
`)
	writeCommandList(w, commands)
	fmt.Fprint(w, "\nRun \"redfence help <command>\" or \"redfence <command> -h\" for a command's flags.\n")
}

// writeCommandList writes the names of cmds, sorted, each with its summary.
func writeCommandList(w io.Writer, cmds map[string]command) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, cmds[name].summary)
	}
	tw.Flush()
}
