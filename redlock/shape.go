package redlock

import "context"

// shape is what a lock of a shape other than the plain one-key lock brings
// of its own, set by its constructor (NewMultiMutex, NewSemaphore, NewRWMutex): its
// acquire and release commands are the Mutex's templates, and these are the
// rest. A Mutex with a shape polls in Lock (the wake-up queue and release
// notices are a plain key's).
type shape struct {
	// extendTmpl is the extend command, with a nil for the value
	// (withValue); a node's reply of 1 is a vote, 0 is ErrNotHeld.
	extendTmpl []any
	// decode reads one node's reply to the acquire command as a vote.
	decode decoder
	// gaveUp, if set, runs when Lock returns without a lease (a read-write
	// lock's waiting writer withdraws its intent marker), on a context that
	// Close and the caller's cancellation no longer stop.
	gaveUp func(ctx context.Context)
}
