package redlock

import "context"

// shape is what a lock other than the plain one-key lock brings of its own
// besides its templates; such a Mutex polls in Lock.
type shape struct {
	decode decoder // the acquire's replies
	// gaveUp, if set, runs on a detached context when Lock fails (a waiting
	// writer withdraws its intent marker).
	gaveUp func(ctx context.Context)
}
