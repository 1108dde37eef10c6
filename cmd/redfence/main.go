// Command redfence is a command-line companion to the redfence locks.
//
// Usage:
//
//	redfence <command> [flags]
//
// Run "redfence help" for the list of commands. The only command so far is
// demo, which starts local redis-server nodes, lets workers contend for one
// Redlock while a node is killed, and reports whether mutual exclusion held.
//
// SIGINT and SIGTERM cancel the running command, which then stops everything
// it started (redis-server processes included) before redfence exits.
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
