// Package quorum fans one operation out to n nodes in parallel and counts the
// replies towards a majority.
//
// It knows nothing about Redis. Each call runs in its own goroutine with its own
// deadline (the per-node timeout), replies are counted as they arrive, and the
// round is decided as soon as the outcome cannot change: enough successes, or
// too many failures for the remaining calls to make up.
//
// The per-node timeout is enforced by the round itself, not only through the
// context handed to each call: a call that ignores its context (a Redis client
// with ContextTimeoutEnabled off, say) is counted as timed out at its deadline
// all the same. Such a call keeps its goroutine until it returns; the round's
// Wait, and the Tracker passed to Start, let the owner join those goroutines.
//
// Start runs each call in a goroutine of its own. Begin opens a round whose
// calls the caller runs by other means (internal/core sends them through a
// per-node batcher that pipelines the commands of concurrent rounds) and
// reports with Deliver; the round's deadline and counting are the same.
//
// What this package does not do: retry, interpret errors, or decide what a
// success means. The caller's call function returns ok=false for a definite
// "no" and an error for a failure; both count against the quorum.
package quorum
