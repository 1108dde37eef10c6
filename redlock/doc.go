// Package core is the lock engine behind the public packages redlock and
// single: configuration and its validation, the acquire, extend and release
// protocols over one or more independent Redis nodes, and the lease
// lifecycle. The public packages wrap it with their own types and docs.
//
// With one node, quorum is 1 and the engine is the classic single-instance
// lock (SET NX PX, compare-and-delete release). With N nodes it is Redlock:
// a majority of nodes must accept within the validity window
//
//	validity = TTL - elapsed - (TTL*drift + 2ms)
//
// measured on the monotonic clock from before the first request was sent.
package redlock
