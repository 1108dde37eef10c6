// Package quorum fans one operation out to n nodes in parallel and counts the
// replies towards a quorum of need successes.
//
// It knows nothing about Redis. The calls of a round share one deadline: the
// per-node timeout from the round's start, or the parent context's deadline
// if that comes first. Replies are counted as they arrive, and the round is
// decided as soon as the outcome cannot change: need successes, or too many
// failures for the remaining calls to make up.
//
// The round enforces the deadline itself: a call that ignores its context (a
// Redis client with ContextTimeoutEnabled off, say) is recorded as timed out
// all the same. Its goroutine runs on until it returns: Round.Wait and
// Round.Settle do not wait for it beyond the per-node timeout, and the
// Tracker passed to Start lets the owner join it.
//
// Start runs each call in a goroutine of its own. Begin opens a round whose
// calls the caller runs by other means (internal/core pipelines them through
// a per-node batcher) and reports with Deliver; deadline and counting are the
// same.
//
// A Call returns (value T, err error). A nil err is a success; any error, a
// refusal as much as a failure, counts against the quorum, and the caller
// tells them apart in Replies. The package does not retry and interprets no
// error but the deadline's: context.DeadlineExceeded while the parent context
// is live is recorded as ErrTimeout, and calls unanswered when the parent
// context ends get its error.
package quorum
