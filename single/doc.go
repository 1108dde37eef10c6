// Package single implements a lock on one Redis deployment: SET NX PX with a
// random owner value, compare-and-delete release, and extend only while the
// key still holds that value. It is the right tool for most applications:
// one round trip per operation, and no more fragile than the Redis the
// application already depends on.
//
// The API is the same method set as package redlock (Mutex.Lock, TryLock;
// Lease.Extend, Release, Done, Err, ValidUntil, Token), so code can be
// written once against a small interface of its own and used with either.
//
// # What it guarantees, and what it does not
//
// While a lease's validity lasts (TTL - elapsed - drift allowance, measured
// on the client's monotonic clock), no other client holds a lease on the same
// key, provided Redis does not lose the key: a restart without persistence,
// FLUSHALL, eviction, or a failover to an asynchronous replica that had not
// yet received the key all break that. A lease can always outlive its
// validity in practice (a paused process does not know it paused), so
// correctness of the protected resource needs fencing tokens checked by the
// resource. See docs/design.md.
package single
