package single

import "github.com/redfence/redfence/redlock"

// The errors are package redlock's, the same values and types, documented
// there: code written for either lock tests for them alike.
var (
	ErrNotAcquired = redlock.ErrNotAcquired // every failed Lock or TryLock wraps it
	ErrLost        = redlock.ErrLost        // the lease ended before Release: validity ran out, or the key lost its value
	ErrReleased    = redlock.ErrReleased    // Release called again, Extend after Release
	ErrTaken       = redlock.ErrTaken       // a node's error: another owner holds the key
	ErrNotHeld     = redlock.ErrNotHeld     // a node's error: the key no longer holds the lease's value
	ErrQuarantined = redlock.ErrQuarantined // a node's error: in restart quarantine
	ErrFenceAhead  = redlock.ErrFenceAhead  // a node's error: a fencing proposal below its counter
	ErrReplicaAcks = redlock.ErrReplicaAcks // a node's error: too few replicas acknowledged (WithReplicaAcks)
	ErrNotNew      = redlock.ErrNotNew      // a node's error in Vouch: it was in use
	ErrClosed      = redlock.ErrClosed      // a call after Client.Close
	ErrNilLease    = redlock.ErrNilLease    // a method of the nil *Lease a failed Lock returns
)
