// Package coord builds two coordination primitives on redfence's locks:
// at-most-once claims on units of work, and leader election.
//
// Both run over a Locker, which New makes from a lock client of package
// single or redlock. coord uses the lock's leases and fencing tokens, and
// runs a few scripts of its own on the same keys.
//
// Claims.Claim tries once to claim a work id and reports ClaimOwned (run the
// work, then Claim.Done), ClaimDone (a duplicate: skip it) or ClaimBusy (in
// flight elsewhere); Claims.Do runs a function under a claim. Done turns the
// claim's lock key into a done marker that refuses later claims of the id
// for the retention (24h by default). The work of an id runs at most once,
// provided every worker holds a valid claim throughout and calls Done before
// it ends, the lock's assumptions hold (docs/design.md), the markers are not
// lost, and duplicates arrive within the retention. It is not exactly-once:
// a worker that crashes between the work and Done leaves the id to run
// again. Make the work idempotent, or fence it (WithFencing).
//
// Election.Campaign blocks until the caller leads, and returns a Leadership
// kept alive by a goroutine that the caller owns until Resign. At most one
// leadership is valid at a time, under the lock's assumptions, and epochs
// (the leases' fencing tokens) strictly increase from leader to leader; they
// stop a deposed leader only where followers and resources check them.
// Election.Leader and Observe are observations, stale as soon as they
// return.
//
// docs/coordination.md has the scripts, the key layout, the guarantees in
// full, the goroutines and the tests.
package coord
