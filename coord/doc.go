// Package coord builds at-most-once claims and leader election on
// redfence's locks, over a Locker that New makes from a *redlock.Client.
//
// Claims.Claim tries once to claim a work id: ClaimOwned (run the work,
// then Claim.Done), ClaimDone (a duplicate) or ClaimBusy. Done leaves a
// marker that refuses the id for the retention.
// The work of an id runs at most once while every worker holds a valid
// claim and calls Done before it ends, under the lock's assumptions; a
// crash between the work and Done lets it run again, so make the work
// idempotent or fence it.
//
// Election.Campaign blocks until the caller leads: one Leadership is valid
// at a time, and epochs (fencing tokens) increase. docs/coordination.md has
// the guarantees in full.
package coord
