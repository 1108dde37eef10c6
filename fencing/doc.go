// Package fencing defines the fencing token that redfence leases carry and
// the guards with which a resource rejects a stale holder's writes.
//
// A lease is bounded by time: a paused client can act after it ran out,
// while another holds the lock. A token grows with every acquisition of a
// key; a Guard remembers the highest token seen per resource and rejects a
// lower one with a *StaleTokenError (ErrStaleToken). Token 0 means fencing
// is off. MemoryGuard, RedisGuard and SQLGuard (PostgreSQL) keep the
// fences; Middleware checks HTTP requests' Fencing-Token header.
//
// With the atomic forms (MemoryGuard.Do, RedisGuard.Write, SQLGuard.CheckTx),
// once a write with token n is applied, no lower token's write is, provided
// the fence survives. docs/fencing.md has the protocol and its proof.
package fencing
