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
//   - demo starts local redis-server nodes, lets workers contend for one
//     Redlock while a node is killed, and reports whether mutual exclusion
//     held.
//
// docs/cli.md describes every command, flag and exit code.
//
// SIGINT and SIGTERM cancel the running command, which then stops everything
// it started (redis-server processes, or the command run by exec) before
// redfence exits.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
