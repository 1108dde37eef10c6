package single

import (
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// The types are package redlock's: one Client, Mutex and Lease serve both
// the single-instance lock and Redlock, so code written against them works
// with either, and their methods are documented there; so are the error and
// report types.
type (
	// Client runs locks on one Redis deployment. Its methods are
	// redlock.Client's: NewMutex, NewMultiMutex (several keys, all or
	// none), NewRWMutex (readers share, a writer excludes), NewSemaphore
	// (k permits), Inspect, CheckNodes, Vouch, Quorum, Clients and Close.
	Client = redlock.Client
	// Mutex is a named lock; see redlock.Mutex.
	Mutex = redlock.Mutex
	// Lease is one acquisition of a Mutex; see redlock.Lease.
	Lease = redlock.Lease
	// Semaphore is a named counting semaphore; see redlock.Semaphore.
	Semaphore = redlock.Semaphore
	// RWMutex is a named read-write lock; see redlock.RWMutex.
	RWMutex = redlock.RWMutex

	// QuorumError reports that an operation failed; with one node, Need is
	// 1 and Nodes holds the one NodeError.
	QuorumError = redlock.QuorumError
	// NodeError is one node's part in a QuorumError.
	NodeError = redlock.NodeError
	// ConfigError reports an invalid option or argument.
	ConfigError = redlock.ConfigError
	// QuarantineError is a node's refusal during the restart quarantine.
	QuarantineError = redlock.QuarantineError
	// ReplicaAckError says how many replicas acknowledged a lock write.
	ReplicaAckError = redlock.ReplicaAckError
	// NodeCheck is one node's report from Client.CheckNodes.
	NodeCheck = redlock.NodeCheck
	// Inspection is a key's state as Client.Inspect reads it.
	Inspection = redlock.Inspection
	// NodeState is one node's part in an Inspection.
	NodeState = redlock.NodeState
	// NodeQuarantine is a node's restart-quarantine state in a NodeState.
	NodeQuarantine = redlock.NodeQuarantine
)

// New returns a Client over one Redis deployment: a standalone server, a
// Sentinel-managed primary (redis.NewFailoverClient), or a Cluster (keys are
// placed by slot). opts set defaults for every Mutex; the restart quarantine
// is off unless WithQuarantine turns it on. It returns a *ConfigError when
// client is nil, an option is invalid, or Redis refuses scripts (an ACL user
// without EVALSHA and EVAL: extend and release are scripts, so a lock could
// be taken but never released); New asks with a small script, waiting at
// most max(node timeout, 1s). If Redis does not answer in time, New still
// succeeds.
//
// A failover to an asynchronous replica can lose a lock key, letting a
// second client in: use fencing tokens where that matters, and consider
// WithReplicaAcks. Give the client ContextTimeoutEnabled so that a request
// abandoned at the per-node timeout ends there too, and MaxRetries -1 and
// DialerRetries 1, so that Redis's own error is not lost in go-redis's
// retries (see the README, Lock clients).
func New(client redis.UniversalClient, opts ...Option) (*Client, error) {
	return redlock.NewSingle(client, opts...)
}
