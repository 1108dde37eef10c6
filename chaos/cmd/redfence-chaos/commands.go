package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// Exit codes shared by all commands, as redfence's (docs/cli.md).
const (
	exitOK          = 0   // every run met its expectation, or the command did what it was asked
	exitFailure     = 1   // a run missed its expectation, found a violation, or the command failed
	exitUsage       = 2   // bad command line
	exitInterrupted = 130 // SIGINT, SIGTERM, SIGHUP or SIGQUIT cancelled the command
)

// prog is the program's name in usage and error messages.
const prog = "redfence-chaos"

// command is one redfence-chaos subcommand.
type command struct {
	// summary is a one-line description for the command list.
	summary string
	// run executes the command with the arguments after its name and returns
	// the process exit code. It must stop everything it started before it
	// returns, including when ctx is cancelled. Given -h it prints its flags
	// to stderr and returns exitOK.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists every subcommand by name.
var commands = map[string]command{
	"scenarios": {
		summary: "run the fault scenarios of docs/chaos.md against redlock and single (processes or Docker), check each expectation",
		run:     runScenariosCommand,
	},
	"soak": {
		summary: "run every lock for -duration under a seeded mix of every fault, every checker on (docs/soak.md)",
		run:     runSoakCommand,
	},
	"demo": {
		summary: "run N local redis-server nodes, let workers contend for one Redlock, kill a node mid-run, report",
		run:     runDemoCommand,
	},
	"version": {
		summary: "print the module version this binary was built from",
		run:     runVersionCommand,
	},
}

// run dispatches args (without the program name) to a subcommand and returns
// the exit code: usage for no or an unknown command, the command list for
// help, -h, -help or --help, and with "help NAME" that command's flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: no command given\n", prog)
		printUsage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", prog, name)
		printUsage(stderr)
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
			fmt.Fprintf(stderr, "%s help: unknown command %q\n", prog, args[0])
			printUsage(stderr)
			return exitUsage
		}
		// A command prints its flags to its stderr on -h; help goes to stdout.
		return cmd.run(ctx, []string{"-h"}, stdout, stdout)
	default:
		fmt.Fprintf(stderr, "%s help: want at most one command name\n", prog)
		return exitUsage
	}
}

// printUsage writes the program's usage and the sorted command list to w.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `redfence-chaos: the redfence fault-injection suite, soak and demo

Usage:
  redfence-chaos <command> [flags]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands[name].summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\nRun \"redfence-chaos help <command>\" or \"redfence-chaos <command> -h\" for a command's flags.\n")
}
