// Package redlock implements distributed locks on Redis: Redlock over
// independent primaries (New with several clients) or the single-instance
// lock (New with one client). An acquire sets the key, with a random value,
// on every node in parallel and succeeds when a majority agreed while
// validity = TTL - elapsed - (TTL*driftFactor + 2ms) is left, on the
// monotonic clock. Release is compare-and-delete on all nodes; Extend never
// re-creates a key.
//
// While a lease is valid no other client holds the key, provided node clocks
// run at about the client's rate and no node loses a key. A paused holder can
// outlive its validity: protect the resource with fencing tokens (package
// fencing). See docs/design.md.
package redlock
