// Command redfence is a command-line companion to the redfence locks.
//
// Usage:
//
//	redfence <command> [flags]
//
// The commands:
//
//   - exec runs a command while holding a lock, keeping the lock alive, and
//     stops the command if the lock is lost;
//   - status shows a lock's holder, TTL, fence counter and each node's
//     restart-quarantine state;
//   - nodes check reports node settings that can lose acknowledged writes,
//     and nodes vouch ends the restart quarantine of brand-new nodes;
//   - version prints the module version of the binary.
//
// SIGINT, SIGTERM, SIGHUP and SIGQUIT stop what the command started, then
// redfence exits. docs/cli.md describes every command, flag, signal and exit
// code; the fault scenarios, soak and demo are redfence-chaos's.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals are the signals that cancel the running command.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

func main() {
	// Handled (not ignored), so that the commands exec starts get the
	// default SIGPIPE action back.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
