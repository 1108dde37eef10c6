package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The two-client script of scenarios 6, 7, 8, 14 and 15: A acquires and
// writes the fenced resource, something breaks, B acquires and writes, A
// writes late with its old token.

// duel is the state of the two-client scripts (scenarios 6, 7, 8, 14 and
// 15): A's and B's granted acquires and A's late write, nil if the script
// did not get that far.
type duel struct {
	a, b, late *Op
}

// acquireA is A's acquire in a duel: once the lock key is free (awaitFree),
// client 0 tries for 2s. It returns nil, and records the fact, if A never
// acquired.
func (r *run) acquireA(ctx context.Context) *scriptedAcquire {
	r.awaitFree(ctx)
	a := r.acquire(ctx, 0, time.Now().Add(2*time.Second), false)
	if a == nil {
		r.fact("A never acquired")
	}
	return a
}

// writeA records A's granted acquire in s and writes the fenced resource
// with it as client 0.
func (r *run) writeA(ctx context.Context, s *duel, a *scriptedAcquire) {
	s.a = opRef(a.op)
	r.fencedWrite(ctx, 0, a.op, "A")
}

// writeB does the same for B, client 1, if B acquired (b not nil).
func (r *run) writeB(ctx context.Context, s *duel, b *scriptedAcquire) {
	if b != nil {
		s.b = opRef(b.op)
		r.fencedWrite(ctx, 1, b.op, "B")
	}
}

// lateWrite ends a duel: A writes again with its token, recorded in s,
// then A and B (if B acquired) release.
func (r *run) lateWrite(ctx context.Context, s *duel, a, b *scriptedAcquire) {
	s.late = opRef(r.fencedWrite(ctx, 0, a.op, "A-late"))
	r.release(ctx, 0, a)
	if b != nil {
		r.release(ctx, 1, b)
	}
}

// tokenFacts reports A's and B's tokens and the fate of A's late write,
// and returns the roles' operations.
func tokenFacts(v *verdict, s *duel) (a, b, late Op, ok bool) {
	if s.a == nil || s.late == nil {
		v.want(false, "the script did not run (A never acquired)")
		return a, b, late, false
	}
	a, late = *s.a, *s.late
	if s.b == nil {
		v.want(false, "B never acquired")
		return a, b, late, false
	}
	b = *s.b
	rel := "equal to"
	switch {
	case b.Token > a.Token:
		rel = "above"
	case b.Token < a.Token:
		rel = "BELOW"
	}
	rejected := staleRejected(late)
	when := "after A's validity"
	if b.Return < a.ValidUntil {
		when = fmt.Sprintf("%v BEFORE A's validity ended", (a.ValidUntil - b.Return).Round(time.Millisecond))
	}
	v.fact("B acquired %s; A token %d, B token %d (%s A's); A's late write %s", when, a.Token, b.Token, rel, verdictWord(rejected, "REJECTED", "ACCEPTED"))
	return a, b, late, true
}

// checkDoubleGrant is the check of the duels that expect a double grant
// (scenarios 7 and 8): B acquired while A's lease was valid, and fencing
// held.
func checkDoubleGrant(_ *run, v *verdict, s *duel) {
	a, b, late, ok := tokenFacts(v, s)
	if !ok {
		return
	}
	wantDoubleGrant(v, a, b)
	fencingHeld(v, a, b, late)
}

// wantDoubleGrant asserts that B acquired while A's lease was valid, a
// double grant.
func wantDoubleGrant(v *verdict, a, b Op) {
	v.want(b.Return < a.ValidUntil, "B did not acquire while A's lease was valid")
	v.want(v.res.DoubleGrants >= 1, "no double grant recorded, want >= 1")
}

// fencingHeld asserts what fencing tokens promise whatever the lock did: B,
// which acquired after A returned, has the larger token, and A's late write
// is rejected.
func fencingHeld(v *verdict, a, b, late Op) {
	v.want(b.Token > a.Token, "B's token %d is not above A's %d", b.Token, a.Token)
	v.want(staleRejected(late), "A's late write was not rejected (status %v)", late.Status)
}

// awaitFree waits, for at most two TTLs, until no running lock node holds the
// lock key, so that a duel starts from a free key. A workload acquire cut off
// when its workload ended can leave its value on a node, to expire with the
// TTL (the engine's cleanup does not wait for a node that timed out); set just
// before A's acquire, such a key would outlast A's validity on a node only B
// reaches, and refuse B for a reason the scenario is not about. Killed and
// paused nodes are not asked: they could not answer.
func (r *run) awaitFree(ctx context.Context) {
	var nodes []Node
	r.mu.Lock()
	for _, n := range r.nodes {
		if !r.down[n] && !r.paused[n] {
			nodes = append(nodes, n)
		}
	}
	r.mu.Unlock()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = newRedisClient(n.Addr())
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close() // a direct client; closing it reports nothing worth a fact
		}
	}()
	deadline := time.Now().Add(2 * r.ttl)
	for {
		held, err := r.heldOn(ctx, nodes, clients)
		if err == nil && len(held) == 0 {
			return
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(10*time.Millisecond)) {
			if err != nil {
				r.fact("before A's acquire, the lock key could not be checked: %v", err)
			} else {
				r.fact("before A's acquire, the lock key was still on %s", strings.Join(held, ", "))
			}
			return
		}
	}
}

// heldOn names those of nodes that hold the lock key, asking each through
// its client in clients.
func (r *run) heldOn(ctx context.Context, nodes []Node, clients []*redis.Client) ([]string, error) {
	var held []string
	for i, n := range nodes {
		cctx, cancel := nodeCtx(ctx)
		k, err := clients[i].Exists(cctx, r.key).Result()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name(), err)
		}
		if k > 0 {
			held = append(held, n.Name())
		}
	}
	return held, nil
}
