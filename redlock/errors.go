package redlock

import "github.com/redfence/redfence/internal/core"

// Errors. They are the same values as the errors of the same name in package
// single, so code written for either lock can test for them.
var (
	// ErrNotAcquired is wrapped by every error of a Lock or TryLock that did
	// not return a lease. When nodes answered or failed the error also holds
	// a *QuorumError; when the context ended it also wraps ctx.Err().
	ErrNotAcquired = core.ErrNotAcquired
	// ErrLost is wrapped when a lease is known to be over before it was
	// released: its validity ran out, or too many nodes no longer hold its
	// value for a majority to remain.
	ErrLost = core.ErrLost
	// ErrReleased is returned by Release when called a second time, by Extend
	// after Release, and by Err once Release ended the lease.
	ErrReleased = core.ErrReleased
	// ErrTaken is a node's error (inside a NodeError) when another owner holds
	// the key there: contention rather than a failure.
	ErrTaken = core.ErrTaken
	// ErrNotHeld is a node's error (inside a NodeError) when an extend or
	// release found that the key no longer holds the lease's value there.
	ErrNotHeld = core.ErrNotHeld
	// ErrQuarantined is a node's error (inside a NodeError) when it refused
	// to vote because it is in restart quarantine; errors.As with a
	// QuarantineError gives the time left.
	ErrQuarantined = core.ErrQuarantined
	// ErrFenceAhead is a node's error (inside a NodeError) when a fencing
	// proposal was below the node's counter; redfence retries higher.
	ErrFenceAhead = core.ErrFenceAhead
	// ErrReplicaAcks is a node's error (inside a NodeError, through a
	// *ReplicaAckError) when fewer replicas than WithReplicaAcks asks for
	// acknowledged an acquire or an extend in time.
	ErrReplicaAcks = core.ErrReplicaAcks
)

// ReplicaAckError says how many replicas acknowledged a lock write
// (WithReplicaAcks), of how many asked for, within the timeout; Err is set
// when WAIT itself failed.
type ReplicaAckError = core.ReplicaAckError

// Errors of calls that cannot run; the same values as in package single.
var (
	// ErrInvalid is wrapped by every *ConfigError: the module's one
	// invalid-argument value (coord, ratelimit and fencing wrap it too).
	ErrInvalid = core.ErrInvalid
	// ErrClosed is wrapped by the error of every call that begins after
	// Client.Close (Lock and TryLock wrap ErrNotAcquired too), of a Lock that
	// Close interrupted, and of KeepAlive and Do when Close ended them.
	ErrClosed = core.ErrClosed
	// ErrNilLease is the error of the methods of a nil *Lease, the one a
	// failed Lock or TryLock returns.
	ErrNilLease = core.ErrNilLease
)

// QuarantineError is a node's refusal to vote during the restart
// quarantine; Left is how long it still sits out.
type QuarantineError = core.QuarantineError

// ErrNotNew is a node's error (inside a NodeError of Vouch's *QuorumError)
// when the node shows it was in use: it holds keys besides its quarantine
// marker (lock keys, fence hashes, other data), or it was vouched for in an
// earlier run. Vouch then vouches for no node.
var ErrNotNew = core.ErrNotNew

// QuorumError reports that an operation ("acquire", "extend" or "release")
// did not get the Need successes it needed; Got is how many it got and Nodes
// lists each node that refused or failed, in index order. It unwraps to every
// node's error, so errors.Is(err, ErrTaken) tells contention apart from
// infrastructure failures such as timeouts.
type QuorumError = core.QuorumError

// NodeError is one node's part in a QuorumError: its index in the client
// list given to New, its address, and its error.
type NodeError = core.NodeError

// ConfigError reports an invalid client list, option or key.
// It also reports a nil argument: a context, Do's fn, or a nil BackOff
// (typed or not) from the WithRetry factory.
type ConfigError = core.ConfigError

// NodeCheck is one node's report from Client.CheckNodes: its role,
// persistence, eviction and replication settings, its clock offset, and
// Risks: what in them still lets the lock grant a second holder (a lost lock
// key) or a fencing token repeat (an evicted fence hash, a clock far off);
// a lost fence counter alone no longer does. Safe reports a node that was
// checked and showed no risk; Err is set when the node could not be checked
// (CONFIG is often disabled on managed services).
type NodeCheck = core.NodeCheck
