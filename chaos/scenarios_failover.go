package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// --- 7: failover to a replica (single) ---

// scenario7 is scenario 7, failover to an asynchronous replica (single).
func scenario7() Scenario {
	return Scenario{
		Name:    "7",
		Title:   "failover to an asynchronous replica (single)",
		Steps:   "A primary n0 and a replica n1, replicating through a proxy. After a warm-up, once the replica has caught up (WAIT), the replication link is blackholed; client A acquires on the primary and writes; the replica is promoted (REPLICAOF NO ONE) and every client's link retargeted to it; client B acquires while A's lease is valid and writes; the old primary is killed; A writes again.",
		Expect:  "Double grant EXPECTED and asserted: the promoted replica never saw A's key. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
		Why:     "Asynchronous replication loses acknowledged writes on failover (Jepsen, Redis 2013): single is only as safe as its Redis's durability (docs/design.md, single vs redlock). The replica missed A's counter write too, but single's token is max(counter + 1, the node's clock in microseconds) (docs/fencing.md, The proof), and the replica's clock is past A's token. This failover is forced by hand within a second, which is enough with one clock (one machine); across machines fencing needs it to take more than 2s (docs/fencing.md, The guarantee, assumption (D)), as Sentinel and Cluster failovers do by default.",
		Locks:   []string{LockSingle},
		spec:    fastSync(),
		replica: true,
		unsafe:  true,
		script:  newScript(playFailover, checkDoubleGrant),
	}
}

func playFailover(ctx context.Context, r *run, s *duel) error {
	primary, replica := r.nodes[0], r.replica
	link, err := r.nw.AddLink("replication", primary.Addr())
	if err != nil {
		return err
	}
	rc, pc := adminClient(replica.Addr()), adminClient(primary.Addr())
	r.conns = append(r.conns, rc, pc)
	if err := replicate(ctx, rc, link.Addr()); err != nil {
		return err
	}
	d := r.opts.Duration
	// The replica has every write so far; from now on it gets none.
	if err := r.catchUp(ctx, pc, "the blackhole"); err != nil {
		return err
	}
	endRepl := r.fault("replication n0 -> n1 blackholed")
	if err := link.Blackhole(); err != nil {
		return err
	}
	a := r.acquireA(ctx)
	if a == nil {
		return nil
	}
	r.writeA(ctx, s, a)
	// The failover: the replica is promoted and every client now reaches
	// it in the primary's place. The old primary is killed once B has
	// acquired, so that a slow docker kill does not eat A's lease.
	endFail := r.fault("failover: replica n1 promoted, clients retargeted, primary n0 killed")
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promoting the replica: %w", err)
	}
	for c := range scenarioClients {
		if err := r.nw.Retarget(c, 0, replica.Addr()); err != nil {
			return err
		}
	}
	b := r.acquire(ctx, 1, a.lease.ValidUntil(), false)
	r.writeB(ctx, s, b)
	if err := r.kill(ctx, primary); err != nil {
		return err
	}
	endFail()
	r.lateWrite(ctx, s, a, b)
	endRepl()
	r.healed()
	return r.workload(ctx, scenarioClients, d/3, nil)
}

// fastSync is the NodeSpec of the scenarios with a replica (7, 15): the
// primary starts the full sync at once instead of waiting 5s for more
// replicas (Redis 7's diskless-sync default).
func fastSync() NodeSpec {
	return NodeSpec{Args: []string{"--repl-diskless-sync-delay", "0"}}
}

// catchUp runs the warm-up workload (a third of the run) and then waits
// until the replica of pc's primary has every write so far (WAIT 1), or
// fails saying it did not catch up before what comes next.
func (r *run) catchUp(ctx context.Context, pc *redis.Client, before string) error {
	if err := r.workload(ctx, scenarioClients, r.opts.Duration/3, nil); err != nil {
		return err
	}
	if n, err := pc.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n < 1 {
		if err == nil {
			err = fmt.Errorf("WAIT 1 answered %d", n)
		}
		return fmt.Errorf("the replica did not catch up before %s: %w", before, err)
	}
	return nil
}
