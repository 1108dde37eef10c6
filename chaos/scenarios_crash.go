package chaos

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redfence/redfence/redlock"
)

// --- 2: kill a minority ---

// scenario2 is scenario 2, kill a minority (2 of 5) mid-run, restart later.
func scenario2() Scenario {
	return Scenario{
		Name:   "2",
		Title:  "kill a minority (2 of 5) mid-run, restart later",
		Steps:  "Nodes run with appendfsync always. A quarter into the run n3 and n4 are killed (SIGKILL, docker kill); 35% of the run after both are down they are started again (with their data) and sit out the restart quarantine.",
		Expect: "Safe (0 double grants, 0 violations, 0 lost updates), and grants keep coming while the two nodes are down (at least one grant in that window; the availability is reported, not asserted).",
		Why:    "Redlock needs only a majority: {n0,n1,n2} still answer, and an acquire does not wait for dead nodes longer than the per-node timeout (docs/design.md, Liveness; failure modes: minority down).",
		Locks:  []string{LockRedlock},
		spec:   NodeSpec{Persistence: AOFAlways},
		script: newScript(playKillMinority, checkKillMinority),
	}
}

// killOutage is the outage of scenarios 2 and 3: the victims are killed
// at at and started again (with what their persistence kept) once all
// have been down for lasts; the run goes on for tail after.
func (r *run) killOutage(victims []Node, at, lasts, tail time.Duration) outage {
	names := make([]string, len(victims))
	for i, n := range victims {
		names[i] = n.Name()
	}
	return outage{what: "kill " + strings.Join(names, ", "), victims: victims, at: at, lasts: lasts, tail: tail, begin: r.kill, finish: r.restart}
}

func playKillMinority(ctx context.Context, r *run, w *window) error {
	d := r.opts.Duration
	// The tail is for the recovery time.
	return r.playOutage(ctx, d, r.killOutage([]Node{r.nodes[3], r.nodes[4]}, d/4, d*35/100, time.Second), w)
}

func checkKillMinority(_ *run, v *verdict, w *window) {
	g, a, ok := grantsDuring(v, w, "the kill window did not complete within the run")
	if !ok {
		return
	}
	v.fact("%d grants while n3, n4 were down; availability then %.0f%%", g, a*100)
	// Liveness, not a rate: a rate threshold would flake on a loaded machine.
	v.want(g > 0, "no grant while two nodes were down: the remaining majority must keep granting")
}

// --- 3: kill a majority ---

// scenario3 is scenario 3, kill a majority (single: the node), restart later.
func scenario3() Scenario {
	return Scenario{
		Name:   "3",
		Title:  "kill a majority (single: the node), restart later",
		Steps:  "Nodes run with appendfsync always. At 0.5s n0, n1 and n2 (single: its one node) are killed; a second after all are down they are started again; the run goes on for 1s after they are up (redlock: the 2s restart quarantine and 1.5s more).",
		Expect: "No acquire started while the majority is down succeeds; every acquire returns within its deadline (0 overran): none hangs; grants resume after the restart (recovery time reported; for redlock it includes the 2s restart quarantine).",
		Why:    "An outage costs availability, never safety or a hung caller: each node request is bounded by the per-node timeout (docs/design.md: majority down).",
		Locks:  []string{LockRedlock, LockSingle},
		spec:   NodeSpec{Persistence: AOFAlways},
		script: newScript(playKillMajority, checkKillMajority),
	}
}

func playKillMajority(ctx context.Context, r *run, w *window) error {
	victims := r.nodes
	tail := time.Second
	if r.lock == LockRedlock {
		victims = r.nodes[:3]
		tail = scenarioQuarantine + 1500*time.Millisecond
	}
	const killAt, downFor = 500 * time.Millisecond, time.Second
	return r.playOutage(ctx, r.opts.Duration, r.killOutage(victims, killAt, downFor, tail), w)
}

func checkKillMajority(_ *run, v *verdict, w *window) {
	g, _, ok := grantsDuring(v, w, "the kill window did not complete within the run")
	if !ok {
		return
	}
	_, failed := countAcquires(v.ops, func(op Op) bool { return op.Call >= w.from.at && op.Return <= w.to.at })
	v.fact("%d acquires failed while the majority was down, %d granted", failed, g)
	v.want(g == 0, "%d acquires granted while a majority was down, want 0", g)
	v.want(failed > 0, "no acquire was attempted while the majority was down")
	v.want(!v.res.Unrecovered, "no grant after the restart")
}

// --- 6, 8: two clients with overlapping bare majorities ---

// scenario6 is scenario 6, crash-restart of a node without persistence.
func scenario6() Scenario {
	return Scenario{
		Name:   "6",
		Title:  "crash-restart of a node without persistence",
		Steps:  "After a warm-up, client A reaches only {n0,n1,n2} and client B only {n2,n3,n4}. A acquires (majority {n0,n1,n2}) and writes; n2 is killed and started again; B tries to acquire while A's lease is valid, and writes once it has; A then writes again with its token.",
		Expect: "6a (no persistence, no quarantine): a double grant, expected and asserted; 6b (restart quarantine) and 6c (appendfsync always): 0 double grants. In all three B's token is above A's and A's late write is REJECTED (asserted).",
		Why:    "The Redlock paper's crash-recovery case, and the delayed-restart rule that answers it; the clock floor of the fencing tokens covers the counter that a restart without persistence loses (docs/fencing.md, The proof).",
		Locks:  []string{LockRedlock},
		script: newScript(playCrashRestart, checkCrashRestart),
		Variants: []Scenario{
			{
				Name:     "6a",
				Title:    "crash-restart, no persistence, no quarantine",
				Steps:    "Scenario 6 with NoPersistence nodes and WithQuarantine(0): n2 comes back empty and votes at once. The TTL is 2s here, not 1s: on Docker the kill and restart of n2 alone take about half a second of A's lease, and B must acquire while it lasts.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "A node that forgets a key lets a second majority form (Redlock paper, crash recovery; docs/design.md: restart quarantine). n2 forgot its fence counter too, and neither n3 nor n4 saw A's token; but a token is never below the clock, in microseconds, of a node that grants it (the clock floor, docs/fencing.md, The proof), and n2, the node both majorities share, grants B after A's token was issued, reading a clock already past it: every node here reads the machine's one clock. With the quarantine off nothing enforces assumption (D), the 2s a node that lost writes must sit out; a restart that keeps the node's clock needs only that clock not to step back (docs/fencing.md, The guarantee).",
				ttl:      2 * time.Second,
				noQuaran: true,
				unsafe:   true,
			},
			{
				Name:       "6b",
				Title:      "crash-restart, no persistence, restart quarantine on",
				Steps:      "Scenario 6 with NoPersistence nodes and the restart quarantine (2s, for the 1s TTL): n2 comes back empty and sits out 2s.",
				Expect:     "0 double grants: n2 refuses B (restart quarantine) until after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "The delayed-restart rule (Redlock paper), enforced by redfence's acquire script (docs/design.md: restart quarantine), covers the lock key n2 lost; the clock floor covers its lost counter (docs/fencing.md, The proof). Across machines, whose clocks are only within 1s of true time (assumption (C)), the quarantine is also what meets assumption (D): no grant for 2s after a lost write (docs/fencing.md, The guarantee); here the nodes share one clock.",
				quarantine: scenarioQuarantine,
			},
			{
				Name:     "6c",
				Title:    "crash-restart with appendfsync always, no quarantine",
				Steps:    "Scenario 6 with AOFAlways nodes and WithQuarantine(0): n2 comes back with A's key and its counter.",
				Expect:   "0 double grants: B is refused until A's key expires; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:      "No acknowledged write is lost, so both the lock's and the fencing's assumptions hold (docs/design.md: with appendfsync always the quarantine can be off).",
				spec:     NodeSpec{Persistence: AOFAlways},
				noQuaran: true,
			},
		},
	}
}

// views gives client 0 (A) the nodes {0,1,2} and client 1 (B) {2,3,4}, and
// returns the function that heals both.
func (r *run) views() (heal func() error, err error) {
	end := r.fault("A (client 0) reaches {n0,n1,n2}, B (client 1) reaches {n2,n3,n4}")
	if err := errors.Join(r.nw.Partition(0, 0, 1, 2), r.nw.Partition(1, 2, 3, 4)); err != nil {
		return nil, err
	}
	return func() error {
		err := errors.Join(r.nw.Partition(0, allNodes(len(r.nodes))...), r.nw.Partition(1, allNodes(len(r.nodes))...))
		end()
		return err
	}, nil
}

// overlapping plays the script shared by scenarios 6, 8 and 14: after a
// warm-up, prepare (if not nil) runs, A takes {0,1,2} and writes, disturb
// breaks n2, B tries {2,3,4} until bDeadline(A's lease) and writes, A
// writes late; then a cool-down. s records what happened.
func (r *run) overlapping(ctx context.Context, s *duel, prepare, disturb func(ctx context.Context) error, bDeadline func(a *scriptedAcquire) time.Time) error {
	d := r.opts.Duration
	if err := r.workload(ctx, scenarioClients, d/3, nil); err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return err
		}
	}
	heal, err := r.views() // Network takes no context: it changes in-process proxies
	if err != nil {
		return err
	}
	a := r.acquireA(ctx)
	if a == nil {
		return heal()
	}
	r.writeA(ctx, s, a)
	if err := disturb(ctx); err != nil {
		return errors.Join(err, heal())
	}
	b := r.acquire(ctx, 1, bDeadline(a), false)
	r.writeB(ctx, s, b)
	r.lateWrite(ctx, s, a, b)
	if err := heal(); err != nil {
		return err
	}
	r.healed()
	return r.workload(ctx, scenarioClients, d/3, nil)
}

// untilAfterQuarantine is B's deadline in scenarios 6 and 14: A's
// validity, plus the quarantine n2 may sit out, plus room for a slow
// restart.
func (r *run) untilAfterQuarantine(a *scriptedAcquire) time.Time {
	return a.lease.ValidUntil().Add(r.quaran + 2*time.Second)
}

func playCrashRestart(ctx context.Context, r *run, s *duel) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, s, nil, func(ctx context.Context) error {
		what := "empty"
		if r.sc.spec.Persistence == AOFAlways {
			what = "with its AOF"
		}
		end := r.fault("n2 killed and restarted (%s)", what)
		defer end()
		return errors.Join(r.kill(ctx, n2), r.restart(ctx, n2))
	}, r.untilAfterQuarantine)
}

// checkCrashRestart checks scenarios 6 and 14, where n2 loses A's key and
// counter (6c: keeps them). Unsafe variants must show B holding while A's
// lease is valid; the others B refused until A's validity ended (with the
// quarantine on: refused by n2's quarantine). In every variant fencing
// holds.
func checkCrashRestart(r *run, v *verdict, s *duel) {
	a, b, late, ok := tokenFacts(v, s)
	if !ok {
		return
	}
	refused, quarantined := 0, 0
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Client == 1 && op.Status != OK && op.Call > a.Return && op.Call < b.Call {
			refused++
			if strings.Contains(op.Err, redlock.ErrQuarantined.Error()) {
				quarantined++
			}
		}
	}
	switch {
	case refused == 0:
		v.fact("B acquired at its first try")
	case quarantined > 0:
		v.fact("B refused %d times first, %d of them by a node in quarantine", refused, quarantined)
	default:
		v.fact("B refused %d times first", refused)
	}
	if r.sc.unsafe {
		wantDoubleGrant(v, a, b)
	} else {
		v.want(b.Return >= a.ValidUntil, "B acquired while A's lease was valid")
		v.want(refused > 0, "B was never refused")
	}
	if r.quaran > 0 {
		v.want(quarantined > 0, "no node refused B for its quarantine: the quarantine did not act")
	}
	fencingHeld(v, a, b, late)
}
