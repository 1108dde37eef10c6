package coord

import (
	"errors"

	"github.com/redfence/redfence/internal/argerr"
	"github.com/redfence/redfence/redlock"
)

// Errors. ErrLost and ErrReleased are the lock packages' own values (the
// same in single and redlock), so errors.Is works across packages.
var (
	// ErrInvalid is wrapped by every error about a bad argument or option;
	// such errors are *InvalidError values. It is the module's one value, the
	// same as redlock.ErrInvalid.
	ErrInvalid = redlock.ErrInvalid
	// ErrNotOwned is returned by the methods of a Claim that this caller
	// does not own (state ClaimDone or ClaimBusy) that need ownership.
	ErrNotOwned = errors.New("coord: claim not owned by this caller")
	// ErrNoLeader is wrapped by Election.Leader when no campaigner holds
	// the election's lock on a majority of nodes, or its holder has not yet
	// recorded who it is.
	ErrNoLeader = errors.New("coord: no leader")
	// ErrLost is wrapped when a claim or a leadership ended before it was
	// finished or resigned: its lease ran out or was taken over.
	ErrLost = redlock.ErrLost
	// ErrReleased is returned once a claim was marked done or abandoned, or
	// a leadership resigned (by Err, KeepAlive, Extend, and as a context's
	// cause).
	ErrReleased = redlock.ErrReleased
	// ErrTaken is a node's error (inside a QuorumError) when another owner
	// holds the key there.
	ErrTaken = redlock.ErrTaken
)

// QuorumError reports which nodes failed or refused an operation of coord's
// own (marking done, proclaiming, reading the leader); it is the type of the
// lock packages. It unwraps to every node's error.
type QuorumError = redlock.QuorumError

// NodeError is one node's part in a QuorumError.
type NodeError = redlock.NodeError

// InvalidError reports a bad argument or option (Pkg "coord"); it is
// redlock.ConfigError, and satisfies errors.Is(err, ErrInvalid).
type InvalidError = redlock.ConfigError

func invalid(field, format string, args ...any) error {
	return argerr.New("coord", field, format, args...)
}
