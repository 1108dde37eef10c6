package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

// parseCode is the exit code for a command line that failed to parse:
// exitOK after -h (flag.ErrHelp), exitUsage otherwise. It must only be
// called with a non-nil err.
func parseCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// withLocker runs fn with a locker over conn's nodes (newLocker with
// useSingle, s and key), and cleans up in reverse order: the locker, the
// Redis clients, go-redis's logger. While it runs, go-redis's process-wide
// logger shows each line once on stderr. A locker that cannot be made is a
// bad command line: prog names the command in the message.
func withLocker(conn connConfig, useSingle bool, s lockSettings, key, prog string, stderr io.Writer, fn func(lk *locker) int) int {
	logger := newDedupLogger(stderr)
	redis.SetLogger(logger)
	defer logging.Enable()
	defer logger.Summary()
	clients := conn.newClients()
	defer func() { _ = closeClients(clients) }() // best effort on the way out: the exit code is already decided
	lk, err := newLocker(clients, useSingle, s, key)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return exitUsage
	}
	defer func() { _ = lk.Close() }() // waits for straggling node requests before the clients close; the Redlock and single Close never fail
	return fn(lk)
}
