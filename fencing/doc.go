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
package fencing
