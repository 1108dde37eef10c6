// Command redfence-chaos runs the redfence fault-injection suite and the
// demo on local redis-server processes or Docker containers. It is the
// chaos module's binary, kept apart from the operator CLI (redfence), so
// that installing redfence does not build Docker, testcontainers, toxiproxy,
// porcupine or Prometheus.
//
// Usage:
//
//	redfence-chaos <command> [flags]
//
// Run "redfence-chaos help" for the list of commands:
//
//   - scenarios runs the fault scenarios of docs/chaos.md against redlock and
//     single and checks each run against its expectation;
//   - soak runs every lock for a while under a seeded mix of every fault the
//     harness has, with every checker on (docs/soak.md);
//   - demo starts local redis-server nodes, lets workers contend for one
//     Redlock while a node is killed, and reports whether mutual exclusion
//     held;
//   - version prints the module version the binary was built from.
//
// docs/cli.md (The redfence-chaos command) describes every command, flag and
// exit code.
//
// SIGINT, SIGTERM, SIGHUP and SIGQUIT cancel the running command, which then
// stops every node and container it started before redfence-chaos exits.
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
