package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redfence/redfence/fencing"
)

// The errors that calls return wrap these; test for them with errors.Is.
// A node's refusal is in a NodeError, inside a *QuorumError.
var (
	ErrNotAcquired = errors.New("redfence: lock not acquired")                                 // every failed Lock or TryLock
	ErrLost        = errors.New("redfence: lease lost")                                        // the lease ended before Release: expired, or too few nodes hold it
	ErrReleased    = errors.New("redfence: lease already released")                            // a second Release; Extend or KeepAlive after Release
	ErrClosed      = errors.New("redfence: client closed")                                     // a call after Client.Close
	ErrNilLease    = errors.New("redfence: nil lease (a failed Lock or TryLock returns none)") // a method of the nil *Lease a failed Lock returns
	ErrTaken       = errors.New("redfence: key held by another owner")                         // a node's refusal: another owner holds the key
	ErrNotHeld     = errors.New("redfence: key no longer holds this lease's value")            // a node's refusal to extend or release
	ErrQuarantined = errors.New("redfence: node in restart quarantine")                        // a node's refusal, with the time it has left (WithQuarantine)
	ErrFenceAhead  = errors.New("redfence: node's fence counter is not below the proposed token")
	ErrReplicaAcks = errors.New("redfence: too few replicas acknowledged the write") // a node's error, with the count (WithReplicaAcks)
	ErrNotNew      = errors.New("redfence: node is not brand-new")                   // a node's refusal in Vouch: it shows use
	ErrInvalid     = fencing.ErrInvalidArgument                                      // wrapped by every *ConfigError of the module
)

// quarantineError is a node's refusal to vote: it may have lost lock keys
// less than a quarantine ago; left is how much longer it sits out.
type quarantineError struct {
	left time.Duration
}

func (e quarantineError) Error() string {
	return fmt.Sprintf("%v (%v left)", ErrQuarantined, e.left)
}

// quarantined returns qe, wrapped in a sentence that says what to do when
// quarantined nodes are what kept the quorum out of reach.
func quarantined(qe *QuorumError) error {
	n, left := 0, time.Duration(0)
	for _, ne := range qe.Nodes {
		var q quarantineError
		if errors.As(ne.Err, &q) {
			n++
			left = max(left, q.left)
		}
	}
	if n == 0 || qe.Got+n < qe.Need {
		return qe
	}
	return fmt.Errorf("%d node(s) in restart quarantine for up to %v more: nodes that are new, restarted or flushed sit out "+
		"one quarantine period from the first acquire that finds them so, since they may have forgotten a lock; "+
		"on brand-new nodes call Vouch once (redfence nodes vouch), or see WithQuarantine: %w", n, left.Round(time.Second), qe)
}

func (e quarantineError) Is(target error) bool { return target == ErrQuarantined }

// fenceAheadError is a node's refusal of a fence proposal its counter had
// reached.
type fenceAheadError struct{ counter int64 }

func (e fenceAheadError) Error() string {
	return fmt.Sprintf("%v (counter at %d)", ErrFenceAhead, e.counter)
}

func (e fenceAheadError) Unwrap() error { return ErrFenceAhead }

// fenceBelowClockError is a node's refusal of a fence proposal below its
// clock when it granted the key (the clock floor).
type fenceBelowClockError struct{ granted int64 }

func (e fenceBelowClockError) Error() string {
	return fmt.Sprintf("%v (proposal below the node's clock floor %d)", ErrFenceAhead, e.granted)
}

func (e fenceBelowClockError) Unwrap() error { return ErrFenceAhead }

// NodeError is one node's failure within a multi-node operation.
type NodeError struct {
	Index int    // the node's position in the client list, from 0
	Addr  string // the node's address as configured, for messages
	Err   error  // ErrTaken, ErrNotHeld, ErrQuarantined, a timeout, a context error, or the client's error
}

// Error implements error.
func (e NodeError) Error() string {
	return fmt.Sprintf("node %d (%s): %v", e.Index, e.Addr, e.Err)
}

// Unwrap returns the node's error.
func (e NodeError) Unwrap() error { return e.Err }

// QuorumError reports that an operation did not gather the replies it needed.
type QuorumError struct {
	Op    string      // "acquire", "extend" or "release"
	Need  int         // successes needed
	Got   int         // successes received
	Nodes []NodeError // the nodes that failed or refused, in index order
}

// Error implements error.
func (e *QuorumError) Error() string {
	s := fmt.Sprintf("%s: %d of %d needed nodes agreed", e.Op, e.Got, e.Need)
	if len(e.Nodes) == 0 {
		return s
	}
	nodes := make([]string, len(e.Nodes))
	for i, n := range e.Nodes {
		nodes[i] = n.Error()
	}
	return s + " (" + strings.Join(nodes, "; ") + ")"
}

// Unwrap returns every node's error, so that errors.Is and errors.As see
// through a QuorumError to, say, ErrTaken or a network error.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, len(e.Nodes))
	for i, n := range e.Nodes {
		errs[i] = n
	}
	return errs
}

// ConfigError reports an invalid option or argument (Pkg "redlock" or
// "single"); it is the module's one invalid-argument shape, and wraps
// ErrInvalid.
type ConfigError = fencing.InvalidError
