package chaos

import (
	"context"
	"time"
)

// Persistence says what a node keeps across a Kill and Start.
type Persistence int

const (
	// NoPersistence means no RDB and no AOF: a restarted node comes back
	// empty (the suite never SAVEs such a node; see RDBSnapshot).
	NoPersistence Persistence = iota
	// AOFAlways means appendonly yes and appendfsync always: a restarted
	// node keeps every write it acknowledged.
	AOFAlways
	// RDBSnapshot means no AOF and no automatic snapshots (save ""), but
	// the RDB file an explicit SAVE writes stays in the node's data
	// directory across Kill and Start, and Start loads it: a restarted node
	// comes back as of its last SAVE, without what it acknowledged since
	// (and empty if it never saved). Kill is SIGKILL, so nothing is saved
	// on the way down.
	RDBSnapshot
)

// NodeSpec describes the nodes a backend starts.
type NodeSpec struct {
	Persistence Persistence
	// Clock enables SetClockOffset: the node runs with a small LD_PRELOAD
	// shim that adds an offset to gettimeofday, which Redis uses to expire
	// keys. Off by default.
	Clock bool
	// Args are extra redis-server arguments.
	Args []string
}

// Node is one Redis server under the harness's control, on any backend.
// Methods are safe for concurrent use.
type Node interface {
	// Name identifies the node in reports ("n0", "n1", ...).
	Name() string
	// Addr is a host:port this process can reach the node on, stable across
	// Kill and Start. Clients that should suffer network faults connect
	// through a Network's proxies instead.
	Addr() string
	// Kill stops the node at once (SIGKILL, docker kill).
	Kill(ctx context.Context) error
	// Start starts a killed node again on the same address; it keeps its data
	// with AOFAlways persistence, its last SAVE with RDBSnapshot, and
	// nothing with NoPersistence.
	Start(ctx context.Context) error
	// Pause freezes the node (SIGSTOP, docker pause); Resume thaws it.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// SetClockOffset makes the node's wall clock (as Redis sees it) run d
	// ahead of the real one (negative: behind). It needs NodeSpec.Clock.
	SetClockOffset(ctx context.Context, d time.Duration) error
	// Close stops the node for good and removes its data.
	Close() error
}

// Backend starts nodes.
type Backend interface {
	// Name is "process" or "docker".
	Name() string
	// StartNodes starts n nodes, ready to serve, named n0..n(n-1).
	StartNodes(ctx context.Context, n int, spec NodeSpec) ([]Node, error)
	// Close stops everything the backend started.
	Close() error
}
