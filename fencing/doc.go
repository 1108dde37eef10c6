// Package fencing defines the fencing token that redfence leases carry.
//
// A lease on a Redis lock is a promise bounded by time: a client that pauses
// (a GC pause, a slow network) can go on acting after its lease ran out while
// another client holds the lock. A fencing token is a number issued with each
// acquisition; the protected resource remembers the highest token it has seen
// and rejects writes that carry a lower one. That check, at the resource, is
// what keeps the resource correct when the lease's timing assumptions fail.
//
// Token value 0 means "no token": fencing was not enabled on the lock.
//
// This package imports nothing else from redfence.
//
// # Guards
//
// The package also provides that resource-side check. A Guard remembers, per
// resource, the highest token it has accepted. It accepts a token that is at
// least that high (equal tokens pass, because one holder may write several
// times), records it, and rejects a lower one with a *StaleTokenError, which
// satisfies errors.Is(err, ErrStaleToken). Token 0 is rejected with
// ErrInvalidToken, an empty resource with ErrInvalidArgument.
//
//   - MemoryGuard keeps fences in a map, for tests and single-process
//     resources. Its Do runs a function under the guard's lock only if the
//     token is accepted.
//   - RedisGuard keeps fences in Redis. Its Write checks the token and SETs
//     the data in one Lua script.
//   - SQLGuard keeps fences in a PostgreSQL table. Its CheckTx checks the
//     token inside the caller's transaction, so the check and the protected
//     writes commit together.
//   - Middleware checks the Fencing-Token header of HTTP requests with a
//     Guard and hands the token to the handler, whose own write should
//     check it again atomically (see Middleware).
//
// # What a guard guarantees, and what it does not
//
// The check and the write must be one atomic step. A Check followed by a
// separate write is not safe: a newer holder may pass its Check and write in
// between, and the old holder's write then lands on top. Use the atomic
// forms: MemoryGuard.Do, RedisGuard.Write, SQLGuard.CheckTx. With them, once
// a write with token n has been applied, no write with a token below n is
// applied to that resource, whatever the clients' pauses, clocks or network
// delays.
//
// The guarantee holds as long as the fence survives: a fence lost with its
// store (a Redis restart without persistence, a failover to a lagging
// replica, eviction, a dropped table) lets old tokens through again. It also
// assumes that tokens come from a source that never hands out a lower or equal
// token to a later holder of the same resource: a guard can only enforce the
// order of the tokens it is given.
//
// # Fencing your own table
//
// A table that already has a row per resource can hold its own fence column
// instead of using SQLGuard. The write then carries the check in its WHERE
// clause:
//
//	UPDATE r SET data = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// One affected row means the write was applied and the fence recorded; zero
// rows mean the token is stale (or the row does not exist), and the caller
// must not go on as if it had written. The statement is atomic on its own.
// The fence column should be BIGINT NOT NULL DEFAULT 0. See Example
// (ownTable).
package fencing
