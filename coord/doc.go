// Package coord builds two coordination primitives on redfence's locks:
// at-most-once claims on units of work, and leader election.
//
// Both run over a Locker: a single.Client (one Redis deployment) or a
// redlock.Client (N independent primaries) together with the Redis clients
// it was made with, adapted by Single and Redlock. coord uses the lock for
// exclusion and fencing tokens, and runs a few scripts of its own on the
// same keys.
//
// # Claims: do X at most once
//
//	claims, _ := coord.NewClaims(locker)
//	c, state, err := claims.Claim(ctx, "order:42:confirmation-email")
//	switch state {
//	case coord.ClaimOwned: // run the work, then c.Done(ctx) (or c.Abandon(ctx))
//	case coord.ClaimDone:  // a duplicate: the work was done
//	case coord.ClaimBusy:  // in flight elsewhere: come back after c.BusyFor()
//	}
//
// A claim is a lease on the lock key prefix+id: one TTL long, kept alive with
// KeepAlive, watched with Context, exactly like a lease of the lock
// packages. Done replaces the lease's value in that same key by a done
// marker, "!done:<token>:<value>", kept for the retention (24h by default).
// Because the marker and the in-flight claim are one key, the check for
// "done" and the grant of a claim are one atomic step on every node: the
// lock's own SET NX cannot succeed while the marker is there, whether or not
// the in-flight lease had expired. (A separate done key would need a script
// reading both keys, and the lock packages' scripts cannot be extended.)
// Done is a compare-and-set script (claim_done.lua): it writes the marker
// only where the key still holds the claim's value.
//
// With several nodes (redlock), Done writes the marker on every node and
// succeeds with a majority of acknowledgements. A Claim is refused as
// ClaimDone if ANY node that answered holds a marker, even if the lock was
// granted by a majority: a marker on a minority is a partial write (a Done
// that did not reach a majority, or whose majority lost it), and it proves
// that the work ran. At-most-once prefers refusing work that may be done
// over running it twice; a refused id whose Done really failed can be
// re-submitted under a new id, whereas a second run cannot be undone. The
// claimer then copies the marker onto the nodes it had locked, so later
// claims see it on a majority.
//
// # What claims guarantee, and what they do not
//
// While the done marker lives (the retention) on the nodes, no claim of a
// done id is granted. While a claim's lease is valid, no other claim of the
// id is granted. Together: the work of an id runs at most once, provided
//
//   - every worker that runs it holds a valid claim throughout (KeepAlive
//     with Context, or Claims.Do, which stops the work on loss), and calls
//     Done before the claim ends;
//   - the lock's guarantees hold (docs/design.md: no node loses keys, clocks
//     advance at about the same rate, no process pauses past its lease), and
//     the done markers are durable: a restart without persistence, a
//     FLUSHALL, an eviction or a failover that loses a marker re-opens the
//     id, exactly as for a lock key;
//   - duplicates arrive within the retention.
//
// Claims are at-most-once, not exactly-once: a worker that crashes after the
// work but before Done leaves the id to be run again once its claim expires,
// and one whose claim is lost mid-work may overlap the next owner. Where that
// matters, make the work idempotent or fence it: with WithFencing every
// owned claim has a token that grows per id, for the resource to check
// (package fencing).
//
// # Leader election
//
//	e, _ := coord.NewElection(locker, "scheduler")
//	lead, err := e.Campaign(ctx, "host-a") // blocks until leader or ctx ends
//	defer lead.Resign(context.Background())
//	ctx, cancel := lead.Context(ctx)      // cancelled when leadership is lost
//
// Modelled on etcd's concurrency.Election (Campaign, Resign, Leader,
// Observe; no Proclaim). Leadership is a fenced lease on prefix+name, kept
// alive by a goroutine that Campaign starts and Resign stops and joins. Its
// Epoch is the lease's fencing token. After winning, the leader records its
// identity, epoch and start time in the hash {key}:leader with a
// compare-and-set script keyed on its lease value (proclaim.lua), on a
// majority of nodes; Leader reads the lock key and the hash together
// (leader.lua) and reports a leader only if a majority of the nodes that
// answered hold the same lease value and the hash belongs to it. Observe
// polls Leader.
//
// # What elections guarantee, and what they do not
//
// At any time at most one Leadership is valid, under the lock's assumptions
// (see docs/design.md). A leader that cannot keep its lease alive learns it
// (Done closes, Context is cancelled) before another campaigner can win,
// with at least the lock's loss margin to stop. Epochs strictly increase
// from leader to leader. They fence a deposed leader (one that was paused,
// or partitioned, and does not know it lost) only if every follower and
// resource checks them and refuses epochs below the highest it has seen:
// the election cannot reach into a paused process.
//
// Leader and Observe are observations, stale as soon as they return.
// Observe polls (WithPollInterval), so a leadership shorter than the
// interval may go unseen.
//
// # Goroutines
//
// Claims.Claim, Done and Abandon, Election.Leader and Campaign start
// goroutines only for the duration of the call (one per node). Claims.Do
// starts a keep-alive goroutine and joins it before returning. Campaign
// starts the leadership's keep-alive goroutine, which the caller owns: it
// ends on Resign, or by itself when the leadership is lost. Observe starts a
// polling goroutine that ends when its context does.
//
// See docs/coordination.md for the scripts, key layout and failure modes.
package coord
