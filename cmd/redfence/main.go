// Command redfence is a command-line companion to the redfence locks.
//
// Usage:
//
//	redfence <command> [flags]
//
// Run "redfence help" for the list of commands:
//
//   - exec runs a command while holding a lock, keeping the lock alive, and
//     stops the command if the lock is lost;
//   - status shows a lock's holder, TTL and fence counter and each node's
//     restart-quarantine state;
//   - nodes check reports node settings that can lose acknowledged writes,
//     and nodes vouch ends the restart quarantine of brand-new nodes;
//   - version prints the module version the binary was built from.
//
// docs/cli.md describes every command, flag and exit code. The fault
// scenarios, the soak and the demo are the chaos module's binary,
// redfence-chaos, so that this one builds none of Docker, testcontainers,
// toxiproxy, porcupine or Prometheus (TestNoHeavyDependencies).
//
// SIGINT, SIGTERM, SIGHUP (the terminal or SSH session went away) and
// SIGQUIT cancel the running command, which then stops everything it started
// (the command run by exec) before redfence exits.
// A write to a closed stdout or stderr fails instead of killing redfence with
// SIGPIPE, so that a session that went away does not cut that cleanup short.
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
