package docker

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoDocker is wrapped by the error NewBackend returns when no Docker
// engine answers; the engine's or the client's own error is wrapped too.
var ErrNoDocker = errors.New("docker: no Docker engine answers (is the daemon running, and DOCKER_HOST or the docker context pointing at it?)")

// ErrNoRedisServer is wrapped by the error NewBackend returns when it has to
// build the default image and cannot find a usable redis-server executable.
var ErrNoRedisServer = errors.New("docker: no redis-server on this host to build the image from: install it (Debian: apt-get install redis-server), set " + EnvRedisServer + " to its path, or use WithImage")

// ErrClosed is wrapped by errors from a Backend or Node that has been closed.
var ErrClosed = errors.New("docker: closed")

// ErrNotRunning is wrapped by errors from Pause and Resume on a node whose
// container is not running (it was killed, or Redis exited on its own).
var ErrNotRunning = errors.New("docker: node is not running (killed?)")

// ErrNoClock is wrapped by the error SetClockOffset returns on a node started
// without NodeSpec.Clock.
var ErrNoClock = errors.New("docker: node was started without NodeSpec.Clock")

// ErrNotReady is wrapped by the error StartNodes and Node.Start return when a
// container did not answer PING within the start timeout, or exited first.
var ErrNotReady = errors.New("docker: redis-server did not answer PING")

// NodeError reports a failed operation on one node.
type NodeError struct {
	// Node is the node's name ("n0").
	Node string
	// Container is the Docker container's name.
	Container string
	// Op is the failed operation: "start", "kill", "pause", "resume",
	// "set clock offset" or "close".
	Op string
	// Err is the cause; it wraps one of the package's sentinels where one
	// applies, else the Docker client's error.
	Err error
}

// Error implements error.
func (e *NodeError) Error() string {
	// The cause usually carries the package prefix too; say it once.
	cause := "<nil>"
	if e.Err != nil {
		cause = strings.TrimPrefix(e.Err.Error(), "docker: ")
	}
	return fmt.Sprintf("docker: %s (container %s): %s: %s", e.Node, e.Container, e.Op, cause)
}

// Unwrap returns the cause.
func (e *NodeError) Unwrap() error { return e.Err }
