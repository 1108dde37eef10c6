// Package single is the lock on one Redis deployment: SET NX PX with a
// random owner value, compare-and-delete release, and extend only while the
// key still holds that value. It is the right tool for most applications:
// one round trip per operation, and no more fragile than the Redis the
// application already depends on.
//
// New returns a *redlock.Client over the one node, where every quorum is 1:
// the Client, Mutex, Lease, options and errors are package redlock's, so
// code written against them works with either lock.
//
// While a lease's validity lasts (TTL - elapsed - drift, on the client's
// monotonic clock), no other client holds the key, provided Redis does not
// lose it: a restart without persistence, FLUSHALL, eviction, or a failover
// to a replica that had not received it break that. Protect the resource
// with fencing tokens where that matters (docs/design.md, docs/fencing.md).
package single
