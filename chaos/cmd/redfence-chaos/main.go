// Command redfence-chaos runs the redfence fault-injection suite, the soak
// and the demo on local redis-server processes or Docker containers, apart
// from the operator CLI (redfence) so that installing that one builds none
// of Docker, testcontainers, toxiproxy, porcupine or Prometheus.
//
// Usage:
//
//	redfence-chaos <command> [flags]
//
// The commands: scenarios (the fault scenarios of docs/chaos.md, each
// checked against its expectation), soak (every lock under a seeded mix of
// faults, docs/soak.md), demo (workers contend for one Redlock while a node
// is killed) and version.
//
// SIGINT, SIGTERM, SIGHUP and SIGQUIT stop every node and container started,
// then redfence-chaos exits. docs/cli.md describes every command, flag and
// exit code.
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
	// A write to a closed stdout or stderr fails instead of killing the
	// process, so that the nodes are still stopped.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
