package main

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// maxDistinctLogLines bounds the memory of dedupLogger.
const maxDistinctLogLines = 100

// dedupLogger receives go-redis's log lines (see redis.SetLogger) and writes
// each distinct line to w once, counting the repeats: once the demo kills a
// node, every request to it logs the same dial failure. It is safe for
// concurrent use.
type dedupLogger struct {
	mu         sync.Mutex
	w          io.Writer
	seen       map[string]bool
	suppressed int
}

// newDedupLogger returns a dedupLogger writing to w.
func newDedupLogger(w io.Writer) *dedupLogger {
	return &dedupLogger{w: w, seen: make(map[string]bool)}
}

// Printf implements go-redis's logging interface.
func (l *dedupLogger) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[msg] || len(l.seen) >= maxDistinctLogLines {
		l.suppressed++
		return
	}
	l.seen[msg] = true
	fmt.Fprintf(l.w, "%s (repeats are counted, not shown)\n", msg)
}

// Summary writes how many lines were not shown, if any.
func (l *dedupLogger) Summary() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suppressed > 0 {
		fmt.Fprintf(l.w, "redis: %d repeated log lines not shown\n", l.suppressed)
	}
}
