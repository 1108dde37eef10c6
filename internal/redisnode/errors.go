package redisnode

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoBinary is wrapped by the error Start returns when the redis-server
// executable cannot be found.
var ErrNoBinary = errors.New("redis-server not found: install it (Debian: apt-get install redis-server) or set REDFENCE_REDIS_SERVER to its path")

// ErrClosed is wrapped by errors returned from operations on a Node that has
// been closed.
var ErrClosed = errors.New("redisnode: node is closed")

// ErrNotRunning is wrapped by errors returned from Pause and Resume when the
// node has no live redis-server process.
var ErrNotRunning = errors.New("redisnode: redis-server is not running")

// StartError reports that a redis-server process was launched but did not
// become ready: it exited early, the start timeout expired, the context was
// cancelled or the node was closed while waiting.
type StartError struct {
	// Addr is the address the process was meant to listen on.
	Addr string
	// PID is the process id of the failed process.
	PID int
	// Reason describes what went wrong in words.
	Reason string
	// Err is the underlying cause: the process's wait error when it exited,
	// the context's error on timeout or cancellation, or ErrClosed.
	Err error
	// LogTail holds the last lines of the process's stderr and log file.
	LogTail string
}

// Error implements error; it includes the log tail when there is one.
func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redisnode: redis-server on %s (pid %d) %s", e.Addr, e.PID, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if tail := strings.TrimSpace(e.LogTail); tail != "" {
		b.WriteString("\n--- redis-server output (tail) ---\n")
		b.WriteString(tail)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *StartError) Unwrap() error { return e.Err }

// exited reports whether the failure was the process exiting on its own.
func (e *StartError) exited() bool { return e.Reason == reasonExited }

const reasonExited = "exited before answering PING"
