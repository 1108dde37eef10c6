package chaos

import (
	"context"
	"time"
)

// --- 8: clock jump ---

// scenario8 is scenario 8, clock jump forward on one node.
func scenario8() Scenario {
	return Scenario{
		Name:   "8",
		Title:  "clock jump forward on one node",
		Steps:  "Nodes run with a gettimeofday shim. After a warm-up, A reaches only {n0,n1,n2} and B only {n2,n3,n4}. A acquires and writes; n2's clock jumps 2 TTLs forward, so A's key there expires at once; B acquires {n2,n3,n4} while A's lease is valid and writes; A writes again with its token.",
		Expect: "Double grant EXPECTED and asserted. No write was lost, so fencing holds: B's token is above A's and A's late write is REJECTED, 0 fenced violations (all asserted). Tokens follow the nodes' clocks, so n2's jump may put B's token about 2s (in microseconds) further ahead; that is allowed.",
		Why:    "Redis expires keys by wall clock, so a clock jump breaks the lease's timing assumption (Kleppmann's counter-example; docs/design.md, assumptions). Fencing does not rest on it here: with no write lost, case 1 of docs/fencing.md's proof applies, and the counters alone order the tokens whatever the clocks say; a clock that runs ahead raises tokens, it cannot lower them (docs/fencing.md, Assumptions).",
		Locks:  []string{LockRedlock},
		spec:   NodeSpec{Clock: true},
		unsafe: true,
		script: newScript(playClockJump, checkDoubleGrant),
	}
}

func playClockJump(ctx context.Context, r *run, s *duel) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, s, nil, func(ctx context.Context) error {
		// The jump is for good: keys set afterwards expire on time, while
		// jumping back would make them outlive their TTL.
		end := r.fault("n2's clock jumps %v forward", 2*scenarioTTL)
		defer end()
		cctx, cancel := nodeCtx(ctx)
		defer cancel()
		return n2.SetClockOffset(cctx, 2*scenarioTTL)
	}, func(a *scriptedAcquire) time.Time { return a.lease.ValidUntil() })
}
