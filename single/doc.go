// Package single implements a lock on one Redis deployment: SET NX PX with a
// random owner value, compare-and-delete release, and extend only while the
// key still holds that value. It is the right tool for most applications:
// one round trip per operation, and no more fragile than the Redis the
// application already depends on.
//
// The types are package redlock's (Client, Mutex, Lease, Option and the
// errors are aliases), documented there: New is redlock.NewSingle, the same
// engine over one node, where every quorum is 1. Code written against those
// types works with either lock. Two things differ from redlock.New: the
// restart quarantine is off by default (WithQuarantine), and
// WithReplicaAcks is accepted.
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
