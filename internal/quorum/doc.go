// Package quorum fans one operation out to n nodes in parallel and counts
// the replies towards a quorum of need successes. It knows nothing of Redis.
//
// A round's calls share one deadline: the per-node timeout from the round's
// start, or the parent context's, if sooner; a call that ignores its context
// is recorded as timed out (ErrTimeout) and joined through the Tracker. The
// round is decided as soon as the outcome cannot change.
//
// Start runs each call in a goroutine; Begin opens a round whose calls the
// caller runs by other means (redlock pipelines them per node) and reports
// with Deliver. Any error counts against the quorum; the caller tells
// refusals from failures in Replies.
package quorum
