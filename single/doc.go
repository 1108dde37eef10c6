// Package single is the lock on one Redis deployment: SET NX PX with a
// random owner value, compare-and-delete release, and extend only while the
// key holds that value. It is the right tool for most applications.
//
// New returns a *redlock.Client over the one node, so code written against
// redlock's Client, Mutex and Lease works with either lock. While a lease's
// validity lasts (TTL - elapsed - drift, on the monotonic clock), no other
// client holds the key, provided Redis does not lose it (a restart without
// persistence, FLUSHALL, eviction, a failover to a lagging replica); fence
// the resource where that matters (docs/fencing.md).
package single
