// Package fencing defines the fencing token that redfence leases carry, and
// the guards with which a resource rejects a stale holder's writes.
//
// A lease on a Redis lock is bounded by time: a client that pauses (a GC
// pause, a slow network) can act after its lease ran out, while another
// client holds the lock. A fencing token grows with every acquisition of a
// key; the resource remembers the highest token it has seen and rejects
// writes that carry a lower one. Token 0 means "no token": fencing was not
// enabled on the lock.
//
// A Guard is that check. It accepts a token at least as high as the highest
// it recorded for the resource, and rejects a lower one with a
// *StaleTokenError (errors.Is(err, ErrStaleToken)). MemoryGuard keeps fences
// in memory, RedisGuard in Redis, SQLGuard in a PostgreSQL table; Middleware
// checks the Fencing-Token header of HTTP requests.
//
// With the atomic forms, MemoryGuard.Do, RedisGuard.Write and
// SQLGuard.CheckTx, once a write with token n has been applied to a
// resource, no write with a lower token is, whatever the clients' pauses,
// clocks or network delays; a Check followed by a separate write has no such
// guarantee. This assumes that the fence survives (a fence lost with its
// store lets old tokens through again) and that no later holder gets a lower
// or equal token, which the locks ensure. A table with a row per resource can
// keep its own fence column instead: see Example (ownTable).
//
// The package does not import the lock packages. docs/fencing.md has the
// token protocol and its proof, and the guards in detail (Guards).
package fencing
