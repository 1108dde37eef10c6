// Package redlock implements the Redlock distributed lock over N independent
// Redis primaries (New), and holds the lock types that package single's
// lock on one Redis deployment (NewSingle, single.New) shares: one Client,
// Mutex and Lease for both.
//
// # Algorithm
//
// TryLock sends SET key value NX PX ttl to every node in parallel, each call
// bounded by the per-node timeout, with a fresh random value (20 bytes from
// crypto/rand). It succeeds only if a majority of nodes (N/2+1) accepted AND
// the validity left is positive:
//
//	validity = TTL - elapsed - (TTL*driftFactor + 2ms)
//
// where elapsed is measured on the monotonic clock from before the first
// request. On any failure, including a cancelled context, it deletes its
// value from ALL nodes (a reply can be lost after the write landed) using a
// context detached from the caller's, so nothing is left behind. Release is
// a compare-and-delete on all nodes. Extend sets a fresh TTL only where the
// key still holds the lease's value and never re-creates a missing key.
//
// # What it guarantees, and what it does not
//
// While a lease's validity lasts, no other client of the same nodes holds a
// lease on the same key, provided: clocks on the nodes advance at roughly
// the rate of the client's monotonic clock (the drift factor bounds the
// difference), no node loses a key it acknowledged (restart without
// persistence, FLUSHALL, eviction, failover to a replica), and the client
// checks validity before acting. A lease can always outlive its validity in
// practice: a process paused after checking is still paused. Mutual exclusion
// for the protected resource therefore needs fencing tokens checked by the
// resource (package fencing), not a lock alone. See docs/design.md.
//
// Mutex values are stateless and safe for concurrent use; every successful
// Lock or TryLock returns a new Lease.
package redlock
