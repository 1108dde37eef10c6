package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// Scenarios returns the suite: fifteen scenarios, each with what it does,
// the outcome it expects and why (scenario 6 has three variants, 14 has
// four, 15 has two). Run plays one and checks its expectation. Scenarios that provoke an unsafe case do
// it with scripted steps, not by luck, and expect the unsafe outcome.
func Scenarios() []Scenario {
	return []Scenario{
		scenario1(),
		scenario2(),
		scenario3(),
		scenario4(),
		scenario5(),
		scenario6(),
		scenario7(),
		scenario8(),
		scenario9(),
		scenario10(),
		scenario11(),
		scenario12(),
		scenario13(),
		scenario14(),
		scenario15(),
	}
}

// scenario1 is scenario 1, baseline, no faults.
func scenario1() Scenario {
	return Scenario{
		Name:   "1",
		Title:  "baseline, no faults",
		Steps:  "Four clients contend for one lock for the whole run; nothing is disturbed.",
		Expect: "0 double grants, 0 fenced-resource violations, 0 lost updates, unique increasing tokens, no lock key left after its TTL.",
		Why:    "The control experiment: without faults the lock must exclude and the checkers must find nothing; a failure here is a bug in the lock or the harness.",
		Locks:  []string{LockRedlock, LockSingle},
		play: func(ctx context.Context, r *run) error {
			return r.workload(ctx, ScenarioClients, r.opts.Duration, nil)
		},
		check: func(*run, *verdict) {},
	}
}

// allNodes returns 0..n-1.
func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// --- 2: kill a minority ---

// scenario2 is scenario 2, kill a minority (2 of 5) mid-run, restart later.
func scenario2() Scenario {
	return Scenario{
		Name:   "2",
		Title:  "kill a minority (2 of 5) mid-run, restart later",
		Steps:  "Nodes run with appendfsync always. A quarter into the run n3 and n4 are killed (SIGKILL, docker kill); at 60% they are started again (with their data) and sit out the restart quarantine.",
		Expect: "Safe (0 double grants, 0 violations, 0 lost updates), and grants keep coming while the two nodes are down (at least one grant in that window; the availability is reported, not asserted).",
		Why:    "Redlock needs only a majority: {n0,n1,n2} still answer, and an acquire does not wait for dead nodes longer than the per-node timeout (docs/design.md, Liveness; failure modes: minority down).",
		Locks:  []string{LockRedlock},
		spec:   NodeSpec{Persistence: AOFAlways},
		play:   playKillMinority,
		check:  checkKillMinority,
	}
}

func playKillMinority(ctx context.Context, r *run) error {
	d := r.opts.Duration
	victims := []Node{r.nodes[3], r.nodes[4]}
	return r.workload(ctx, ScenarioClients, d, func(wctx context.Context, start time.Time) error {
		if !sleepUntil(wctx, start.Add(d/4)) {
			return nil
		}
		end := r.fault("kill n3, n4")
		if err := each(victims, func(n Node) error { return r.kill(ctx, n) }); err != nil {
			return err
		}
		r.mark("killed")
		if !sleepUntil(wctx, start.Add(d*6/10)) {
			return nil
		}
		r.mark("restarting")
		if err := each(victims, func(n Node) error { return r.restart(ctx, n) }); err != nil {
			return err
		}
		end()
		r.healed()
		return nil
	})
}

func checkKillMinority(r *run, v *verdict) {
	from, ok1 := r.markAt("killed")
	to, ok2 := r.markAt("restarting")
	if !ok1 || !ok2 {
		v.want(false, "the kill window did not complete within the run")
		return
	}
	a := availabilityBetween(v.ops, from, to, DefaultAvailabilityWindow)
	g := grantsBetween(v.ops, from, to)
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
		Steps:  "Nodes run with appendfsync always. At 0.5s n0, n1 and n2 (single: its one node) are killed; a second later they are started again; the run goes on until the restart quarantine (redlock) has ended.",
		Expect: "No acquire started while the majority is down succeeds; every acquire returns within its deadline (0 overran): none hangs; grants resume after the restart (recovery time reported; for redlock it includes the 2s restart quarantine).",
		Why:    "An outage costs availability, never safety or a hung caller: each node request is bounded by the per-node timeout (docs/design.md: majority down).",
		Locks:  []string{LockRedlock, LockSingle},
		spec:   NodeSpec{Persistence: AOFAlways},
		play:   playKillMajority,
		check:  checkKillMajority,
	}
}

func playKillMajority(ctx context.Context, r *run) error {
	victims := r.nodes
	tail := time.Second
	if r.lock == LockRedlock {
		victims = r.nodes[:3]
		tail = ScenarioQuarantine + 1500*time.Millisecond
	}
	const killAt, downFor = 500 * time.Millisecond, time.Second
	d := max(r.opts.Duration, killAt+downFor+tail)
	names := make([]string, len(victims))
	for i, n := range victims {
		names[i] = n.Name()
	}
	return r.workload(ctx, ScenarioClients, d, func(wctx context.Context, start time.Time) error {
		if !sleepUntil(wctx, start.Add(killAt)) {
			return nil
		}
		end := r.fault("kill %s", strings.Join(names, ", "))
		if err := each(victims, func(n Node) error { return r.kill(ctx, n) }); err != nil {
			return err
		}
		r.mark("killed")
		if !sleepUntil(wctx, start.Add(killAt+downFor)) {
			return nil
		}
		r.mark("restarting")
		if err := each(victims, func(n Node) error { return r.restart(ctx, n) }); err != nil {
			return err
		}
		end()
		r.healed()
		return nil
	})
}

func checkKillMajority(r *run, v *verdict) {
	from, ok1 := r.markAt("killed")
	to, ok2 := r.markAt("restarting")
	if !ok1 || !ok2 {
		v.want(false, "the kill window did not complete within the run")
		return
	}
	failed := 0
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Status != OK && op.Call >= from && op.Return <= to {
			failed++
		}
	}
	g := grantsBetween(v.ops, from, to)
	v.fact("%d acquires failed while the majority was down, %d granted", failed, g)
	v.want(g == 0, "%d acquires granted while a majority was down, want 0", g)
	v.want(failed > 0, "no acquire was attempted while the majority was down")
	v.want(!v.res.Unrecovered, "no grant after the restart")
}

// --- 4: the paused holder ---

// scenario4 is scenario 4, the holder pauses past its TTL (Kleppmann).
func scenario4() Scenario {
	return Scenario{
		Name:         "4",
		Title:        "the holder pauses past its TTL (Kleppmann)",
		Steps:        "Three clients run the workload; after a warm-up a scripted fourth client takes the lock (the others paused for that moment, so it cannot be starved), reads the unfenced counter, then stalls past its validity without renewing (a stop-the-world pause). Meanwhile the others acquire, write the fenced resource with newer tokens and increment the counter. The stalled client wakes and writes both: the fenced resource with its old token, and the counter with its stale value plus one.",
		Expect:       "0 double grants (its believed-held interval ended at its ValidUntil); its late fenced write is REJECTED (>= 1 stale write rejected, 0 fenced violations); the unfenced counter shows >= 1 lost update.",
		Why:          "No lease can stop a paused holder from acting late; only the resource's token check can (Kleppmann 2016; docs/fencing.md, Why tokens). The unfenced counter shows what happens without it.",
		Locks:        []string{LockRedlock, LockSingle},
		lossExpected: true,
		play:         playPausedHolder,
		check:        checkPausedHolder,
	}
}

func playPausedHolder(ctx context.Context, r *run) error {
	const a = 3 // the scripted client
	acq, err := r.warmThenAcquire(ctx, a, false)
	if err != nil || acq == nil {
		return err
	}
	r.name("A.acquire", acq.op)
	return r.alongside(ctx, a, r.opts.Duration-scriptWarmup, 300*time.Millisecond, func(ctx context.Context) error {
		// The read half of a read-modify-write, before the pause.
		p := r.h.Invoke(a, UnfencedWrite)
		read := r.h.Now()
		v, err := r.control.Get(ctx)
		if err != nil {
			p.Complete(Fail, WithLease(acq.op.ID), WithErr(err))
			return err
		}
		end := r.fault("client %d paused past its lease (no renewal)", a)
		sleepUntil(ctx, acq.lease.ValidUntil().Add(200*time.Millisecond))
		// Hold the pause until a newer holder has written and counted.
		tA := acq.op.Token
		r.waitFor(ctx, 3*time.Second, func(ops []Op) bool {
			wrote, counted := false, false
			for _, op := range ops {
				wrote = wrote || (op.Kind == FencedWrite && op.Status == OK && op.Token > tA)
				counted = counted || (op.Kind == UnfencedWrite && op.Client != a && op.Status == OK && op.Call > read)
			}
			return wrote && counted
		})
		end()
		r.name("A.late", r.fencedWrite(ctx, a, acq.op, fmt.Sprintf("c%d-late", a)))
		err = r.control.Set(ctx, v+1)
		st := OK
		if err != nil {
			st = Unknown
		}
		r.name("A.increment", p.Complete(st, WithLease(acq.op.ID), WithValue(fmt.Sprintf("%d->%d", v, v+1)), WithErr(err), WithNote("after the pause")))
		r.release(ctx, a, acq)
		return nil
	})
}

func checkPausedHolder(r *run, v *verdict) {
	acq, ok1 := r.op("A.acquire")
	late, ok2 := r.op("A.late")
	if !ok1 || !ok2 {
		v.want(false, "the scripted pause did not run")
		return
	}
	rejected := late.Status == Fail && late.Note == NoteStale
	v.fact("paused client's token %d; its late fenced write %s; %d updates lost in the control", acq.Token, verdictWord(rejected, "REJECTED", "ACCEPTED"), v.res.LostUpdates)
	v.want(rejected, "the paused client's late fenced write was not rejected (status %v)", late.Status)
	v.want(v.res.FencedRejected >= 1, "no stale write rejected")
	v.want(v.res.LostUpdates >= 1, "the unfenced control lost no update")
}

func verdictWord(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// --- 5: a paused node ---

// scenario5 is scenario 5, pause a Redis node beyond the node timeout.
func scenario5() Scenario {
	return Scenario{
		Name:   "5",
		Title:  "pause a Redis node beyond the node timeout",
		Steps:  "A third into the run n0 is frozen (SIGSTOP, docker pause) for 1s, ten times the 100ms per-node timeout, then thawed; requests queued meanwhile run when it thaws.",
		Expect: "0 double grants, 0 violations; the other four keep granting while n0 is frozen (at least one grant in that window; the availability is reported, not asserted, since a rate threshold would flake on a loaded machine).",
		Why:    "A hung node costs each request at most the per-node timeout, and the other four still form majorities; a late SET NX landing on a thawed node costs availability only, since keys expire by TTL (docs/design.md: minority hung).",
		Locks:  []string{LockRedlock},
		play:   playPausedNode,
		check:  checkPausedNode,
	}
}

func playPausedNode(ctx context.Context, r *run) error {
	d := r.opts.Duration
	n0 := r.nodes[0]
	return r.workload(ctx, ScenarioClients, d, func(wctx context.Context, start time.Time) error {
		if !sleepUntil(wctx, start.Add(d/3)) {
			return nil
		}
		end := r.fault("pause n0 for 1s")
		if err := r.pause(ctx, n0); err != nil {
			return err
		}
		r.mark("paused")
		sleepUntil(wctx, time.Now().Add(time.Second))
		r.mark("resuming")
		if err := r.resume(ctx, n0); err != nil {
			return err
		}
		end()
		r.healed()
		return nil
	})
}

func checkPausedNode(r *run, v *verdict) {
	from, ok1 := r.markAt("paused")
	to, ok2 := r.markAt("resuming")
	if !ok1 || !ok2 {
		v.want(false, "the pause did not happen within the run")
		return
	}
	a := availabilityBetween(v.ops, from, to, DefaultAvailabilityWindow)
	g := grantsBetween(v.ops, from, to)
	v.fact("%d grants while n0 was frozen; availability then %.0f%%, over the run %.0f%%", g, a*100, v.res.Availability*100)
	// Liveness, not a rate: a rate threshold would flake on a loaded machine.
	v.want(g > 0, "no grant while n0 was frozen: the other four must keep granting")
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
		Variants: []Scenario{
			{
				Name:     "6a",
				Title:    "crash-restart, no persistence, no quarantine",
				Steps:    "Scenario 6 with NoPersistence nodes and WithQuarantine(0): n2 comes back empty and votes at once. The TTL is 2s here, not 1s: on Docker the kill and restart of n2 alone take about half a second of A's lease, and B must acquire while it lasts.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "A node that forgets a key lets a second majority form (Redlock paper, crash recovery; docs/design.md: restart quarantine). n2 forgot its fence counter too, and neither n3 nor n4 saw A's token; but a token is never below the clock, in microseconds, of a node that grants it (the clock floor, docs/fencing.md, The proof), and n2, the node both majorities share, grants B after A's token was issued, reading a clock already past it: every node here reads the machine's one clock. With the quarantine off nothing enforces assumption (D), the 2s a node that lost writes must sit out; a restart that keeps the node's clock needs only that clock not to step back (docs/fencing.md, The guarantee).",
				Locks:    []string{LockRedlock},
				ttl:      2 * time.Second,
				noQuaran: true,
				unsafe:   true,
				play:     playCrashRestart,
				check:    checkCrashRestart,
			},
			{
				Name:       "6b",
				Title:      "crash-restart, no persistence, restart quarantine on",
				Steps:      "Scenario 6 with NoPersistence nodes and the restart quarantine (2s, for the 1s TTL): n2 comes back empty and sits out 2s.",
				Expect:     "0 double grants: n2 refuses B (restart quarantine) until after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "The delayed-restart rule (Redlock paper), enforced by redfence's acquire script (docs/design.md: restart quarantine), covers the lock key n2 lost; the clock floor covers its lost counter (docs/fencing.md, The proof). Across machines, whose clocks are only within 1s of true time (assumption (C)), the quarantine is also what meets assumption (D): no grant for 2s after a lost write (docs/fencing.md, The guarantee); here the nodes share one clock.",
				Locks:      []string{LockRedlock},
				quarantine: ScenarioQuarantine,
				play:       playCrashRestart,
				check:      checkCrashRestart,
			},
			{
				Name:     "6c",
				Title:    "crash-restart with appendfsync always, no quarantine",
				Steps:    "Scenario 6 with AOFAlways nodes and WithQuarantine(0): n2 comes back with A's key and its counter.",
				Expect:   "0 double grants: B is refused until A's key expires; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:      "No acknowledged write is lost, so both the lock's and the fencing's assumptions hold (docs/design.md: with appendfsync always the quarantine can be off).",
				Locks:    []string{LockRedlock},
				spec:     NodeSpec{Persistence: AOFAlways},
				noQuaran: true,
				play:     playCrashRestart,
				check:    checkCrashRestart,
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
// writes late; then a cool-down.
func (r *run) overlapping(ctx context.Context, prepare, disturb func(ctx context.Context) error, bDeadline func(a *scriptedAcquire) time.Time) error {
	d := r.opts.Duration
	if err := r.workload(ctx, ScenarioClients, d/3, nil); err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return err
		}
	}
	heal, err := r.views() //nolint:contextcheck // Network takes no context: it changes in-process proxies
	if err != nil {
		return err
	}
	a := r.acquire(ctx, 0, time.Now().Add(2*time.Second), false)
	if a == nil {
		r.fact("A never acquired")
		return heal()
	}
	r.name("A.acquire", a.op)
	r.name("A.write", r.fencedWrite(ctx, 0, a.op, "A"))
	if err := disturb(ctx); err != nil {
		return errors.Join(err, heal())
	}
	b := r.acquire(ctx, 1, bDeadline(a), false)
	if b != nil {
		r.name("B.acquire", b.op)
		r.name("B.write", r.fencedWrite(ctx, 1, b.op, "B"))
	}
	r.name("A.late", r.fencedWrite(ctx, 0, a.op, "A-late"))
	r.release(ctx, 0, a)
	if b != nil {
		r.release(ctx, 1, b)
	}
	if err := heal(); err != nil {
		return err
	}
	r.healed()
	return r.workload(ctx, ScenarioClients, d/3, nil)
}

// tokenFacts reports A's and B's tokens and the fate of A's late write,
// and returns the roles' operations.
func tokenFacts(r *run, v *verdict) (a, b, late Op, ok bool) {
	a, okA := r.op("A.acquire")
	late, okL := r.op("A.late")
	b, okB := r.op("B.acquire")
	if !okA || !okL {
		v.want(false, "the script did not run (A never acquired)")
		return a, b, late, false
	}
	if !okB {
		v.want(false, "B never acquired")
		return a, b, late, false
	}
	rel := "equal to"
	switch {
	case b.Token > a.Token:
		rel = "above"
	case b.Token < a.Token:
		rel = "BELOW"
	}
	rejected := late.Status == Fail && late.Note == NoteStale
	when := "after A's validity"
	if b.Return < a.ValidUntil {
		when = fmt.Sprintf("%v BEFORE A's validity ended", (a.ValidUntil - b.Return).Round(time.Millisecond))
	}
	v.fact("B acquired %s; A token %d, B token %d (%s A's); A's late write %s", when, a.Token, b.Token, rel, verdictWord(rejected, "REJECTED", "ACCEPTED"))
	return a, b, late, true
}

// untilAfterQuarantine is B's deadline in scenarios 6 and 14: A's
// validity, plus the quarantine n2 may sit out, plus room for a slow
// restart.
func (r *run) untilAfterQuarantine(a *scriptedAcquire) time.Time {
	return a.lease.ValidUntil().Add(r.quaran + 2*time.Second)
}

func playCrashRestart(ctx context.Context, r *run) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, nil, func(ctx context.Context) error {
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
func checkCrashRestart(r *run, v *verdict) {
	a, b, late, ok := tokenFacts(r, v)
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
		v.want(b.Return < a.ValidUntil, "B did not acquire while A's lease was valid")
		v.want(v.res.DoubleGrants >= 1, "no double grant recorded, want >= 1")
	} else {
		v.want(b.Return >= a.ValidUntil, "B acquired while A's lease was valid")
		v.want(refused > 0, "B was never refused")
	}
	if r.quaran > 0 {
		v.want(quarantined > 0, "no node refused B for its quarantine: the quarantine did not act")
	}
	fencingHeld(v, a, b, late)
}

// fencingHeld asserts what fencing tokens promise whatever the lock did: B,
// which acquired after A returned, has the larger token, and A's late write
// is rejected.
func fencingHeld(v *verdict, a, b, late Op) {
	v.want(b.Token > a.Token, "B's token %d is not above A's %d", b.Token, a.Token)
	v.want(late.Status == Fail && late.Note == NoteStale, "A's late write was not rejected (status %v)", late.Status)
}

// --- 14: a node loses writes: older snapshot, FLUSHALL ---

// scenario14 is scenario 14, a node loses writes under a lease: older snapshot, FLUSHALL.
func scenario14() Scenario {
	return Scenario{
		Name:   "14",
		Title:  "a node loses writes under a lease: older snapshot, FLUSHALL",
		Steps:  "Scenario 6's script (A reaches only {n0,n1,n2}, B only {n2,n3,n4}; A acquires and writes; n2 loses A's key and counter; B tries while A's lease is valid, and writes once it has; A writes again with its token), with two more ways for n2 to lose them: a restart from an RDB snapshot taken before A acquired (14a, 14b), and FLUSHALL while n2 keeps running (14c, 14d).",
		Expect: "With the restart quarantine (14a, 14c): 0 double grants. Without it (14b, 14d): a double grant, expected and asserted. In all four B's token is above A's, A's late write is REJECTED and no fenced write is judged wrong (asserted).",
		Why:    "Two ways of losing writes that docs/fencing.md (The guarantee) covers besides a restart without persistence: a restart from an older RDB snapshot, and FLUSHALL. The quarantine catches the first by the node's uptime and the second by its missing marker; the clock floor keeps tokens increasing in both.",
		Locks:  []string{LockRedlock},
		Variants: []Scenario{
			{
				Name:       "14a",
				Title:      "restart from an older RDB snapshot, restart quarantine on",
				Steps:      "Nodes run with RDBSnapshot persistence (no AOF, no automatic saves). After the warm-up n2 is told to SAVE; then A acquires {n0,n1,n2}; n2 is killed (SIGKILL, docker kill: nothing is saved on the way down) and started again from that snapshot, which the script checks: n2's quarantine marker and its fence counter as of the SAVE are back, A's key is not. n2 sits out the 2s quarantine.",
				Expect:     "0 double grants: n2 refuses B (restart quarantine) although its marker survived, so B acquires only after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "A marker restored from an old snapshot does not vouch for the keys written after it: the acquire script quarantines a node whose run id changed until its uptime reaches the quarantine (docs/design.md: restart quarantine). n2's counter is behind A's token; the clock floor puts B's token above A's anyway (docs/fencing.md, The proof), and the quarantine is what meets assumption (D) for it across machines (docs/fencing.md, The guarantee).",
				Locks:      []string{LockRedlock},
				spec:       NodeSpec{Persistence: RDBSnapshot},
				quarantine: ScenarioQuarantine,
				play:       playOlderSnapshot,
				check:      checkOlderSnapshot,
			},
			{
				Name:     "14b",
				Title:    "restart from an older RDB snapshot, no quarantine",
				Steps:    "Scenario 14a with WithQuarantine(0), so no node has a marker, and a TTL of 2s (as in 6a: on Docker the restart takes a good part of A's lease): n2 comes back with its fence counter as of the SAVE and without A's key, and votes at once.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "A snapshot loses every write made after it, lock keys included, and without the quarantine a second majority forms (docs/design.md: restart quarantine). The counter lost with it is covered by the clock floor: n2 restarts on the machine's one clock, already past A's token (docs/fencing.md, The guarantee: with the quarantine off nothing enforces assumption (D)).",
				Locks:    []string{LockRedlock},
				spec:     NodeSpec{Persistence: RDBSnapshot},
				ttl:      2 * time.Second,
				noQuaran: true,
				unsafe:   true,
				play:     playOlderSnapshot,
				check:    checkOlderSnapshot,
			},
			{
				Name:       "14c",
				Title:      "FLUSHALL on a node, restart quarantine on",
				Steps:      "NoPersistence nodes. While A holds {n0,n1,n2}, n2 gets FLUSHALL and keeps running: A's key, n2's fence counter and its quarantine marker are gone.",
				Expect:     "0 double grants: finding no marker at B's first request, n2 quarantines itself for 2s and refuses, so B acquires only after A's validity; B's token is above A's and A's late write is REJECTED; 0 fenced violations.",
				Why:        "A node without a marker may have lost keys whether or not it restarted, so it sits out one quarantine (docs/design.md: restart quarantine), which also meets assumption (D) for its lost counter (docs/fencing.md, The guarantee); the clock floor puts B's token above A's (docs/fencing.md, The proof).",
				Locks:      []string{LockRedlock},
				quarantine: ScenarioQuarantine,
				play:       playFlushAll,
				check:      checkCrashRestart,
			},
			{
				Name:     "14d",
				Title:    "FLUSHALL on a node, no quarantine",
				Steps:    "Scenario 14c with WithQuarantine(0): n2 votes at once after the FLUSHALL.",
				Expect:   "Double grant EXPECTED and asserted: B acquires {n2,n3,n4} while A's lease is valid. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
				Why:      "FLUSHALL deletes lock keys and fence counters alike, and without the quarantine nothing notices (docs/design.md: restart quarantine). The clock floor keeps B's token above A's: n2 keeps running on a clock already past A's token, the machine's one clock (docs/fencing.md, The proof).",
				Locks:    []string{LockRedlock},
				noQuaran: true,
				unsafe:   true,
				play:     playFlushAll,
				check:    checkCrashRestart,
			},
		},
	}
}

// onNode runs f with a fresh client straight to n (no proxy, no fault),
// closed afterwards: a pooled connection would not survive a restart of n.
func (r *run) onNode(ctx context.Context, n Node, f func(ctx context.Context, c *redis.Client) error) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	c := adminClient(n.Addr())
	err := f(ctx, c)
	if cErr := c.Close(); cErr != nil {
		err = errors.Join(err, cErr)
	}
	if err != nil {
		return fmt.Errorf("on %s: %w", n.Name(), err)
	}
	return nil
}

// fenceCounter reads the run's fence counter on one node (0 if absent).
func (r *run) fenceCounter(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.HGet(ctx, redlock.FenceKey(r.key), "t").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence counter %q: %w", s, err)
	}
	return n, nil
}

// playOlderSnapshot plays 14a and 14b: n2 SAVEs after the warm-up, then is
// killed and restarted from that snapshot while A holds the lock.
func playOlderSnapshot(ctx context.Context, r *run) error {
	n2 := r.nodes[2]
	var saved int64 // n2's fence counter in its snapshot
	snapshot := func(ctx context.Context) error {
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			if err := c.Save(ctx).Err(); err != nil {
				return fmt.Errorf("SAVE: %w", err)
			}
			r.mark("snapshot")
			var err error
			if saved, err = r.fenceCounter(ctx, c); err != nil {
				return err
			}
			if saved == 0 {
				return errors.New("no fence counter to snapshot: the warm-up never fenced on n2")
			}
			return nil
		})
	}
	return r.overlapping(ctx, snapshot, func(ctx context.Context) error {
		end := r.fault("n2 killed and restarted from its snapshot taken before A acquired")
		defer end()
		if err := errors.Join(r.kill(ctx, n2), r.restart(ctx, n2)); err != nil {
			return err
		}
		// What n2 came back with, before anyone asks it for anything.
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			counter, err := r.fenceCounter(ctx, c)
			if err != nil {
				return err
			}
			held, err := c.Exists(ctx, r.key).Result()
			if err != nil {
				return err
			}
			marker, err := c.Exists(ctx, redlock.MarkerKey).Result()
			if err != nil {
				return err
			}
			a, _ := r.op("A.acquire")
			wantMarker := int64(0)
			if r.quaran > 0 {
				wantMarker = 1 // vouched for at setup, so in the snapshot
			}
			ok := counter == saved && counter < int64(a.Token) && held == 0 && marker == wantMarker
			r.flag("from-snapshot", ok)
			r.fact("n2 came back with fence counter %d (%d at the SAVE; A's token %d), A's key %s, its quarantine marker %s",
				counter, saved, a.Token, verdictWord(held == 0, "absent", "PRESENT"), verdictWord(marker == 1, "present", "absent"))
			return nil
		})
	}, r.untilAfterQuarantine)
}

func checkOlderSnapshot(r *run, v *verdict) {
	checkCrashRestart(r, v)
	v.want(r.flagged("from-snapshot"), "n2 did not come back as of its snapshot (see what it came back with)")
}

// playFlushAll plays 14c and 14d: n2 gets FLUSHALL while A holds the lock.
func playFlushAll(ctx context.Context, r *run) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, nil, func(ctx context.Context) error {
		end := r.fault("FLUSHALL on n2")
		defer end()
		return r.onNode(ctx, n2, func(ctx context.Context, c *redis.Client) error {
			return c.FlushAll(ctx).Err()
		})
	}, r.untilAfterQuarantine)
}

// --- 7: failover to a replica (single) ---

// scenario7 is scenario 7, failover to an asynchronous replica (single).
func scenario7() Scenario {
	return Scenario{
		Name:   "7",
		Title:  "failover to an asynchronous replica (single)",
		Steps:  "A primary n0 and a replica n1, replicating through a proxy. After a warm-up, once the replica has caught up (WAIT), the replication link is blackholed; client A acquires on the primary and writes; the replica is promoted (REPLICAOF NO ONE) and every client's link retargeted to it; client B acquires while A's lease is valid and writes; the old primary is killed; A writes again.",
		Expect: "Double grant EXPECTED and asserted: the promoted replica never saw A's key. Fencing still holds (asserted): B's token is above A's, A's late write is REJECTED, 0 fenced violations.",
		Why:    "Asynchronous replication loses acknowledged writes on failover (Jepsen, Redis 2013): single is only as safe as its Redis's durability (docs/design.md, single vs redlock). The replica missed A's counter write too, but single's token is max(counter + 1, the node's clock in microseconds) (docs/fencing.md, The proof), and the replica's clock is past A's token. This failover is forced by hand within a second, which is enough with one clock (one machine); across machines fencing needs it to take more than 2s (docs/fencing.md, The guarantee, assumption (D)), as Sentinel and Cluster failovers do by default.",
		Locks:  []string{LockSingle},
		// The primary starts the full sync at once instead of waiting
		// 5s for more replicas (Redis 7's diskless-sync default).
		spec:    NodeSpec{Args: []string{"--repl-diskless-sync-delay", "0"}},
		replica: true,
		unsafe:  true,
		play:    playFailover,
		check:   checkFailover,
	}
}

// adminClient is a client for setup commands that may block for a while.
func adminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: time.Second})
}

func playFailover(ctx context.Context, r *run) error {
	primary, replica := r.nodes[0], r.replica
	host, err := NodeHost(ctx, r.backend)
	if err != nil {
		return err
	}
	link, err := r.nw.AddLinkOn("replication", host, primary.Addr())
	if err != nil {
		return err
	}
	rc, pc := adminClient(replica.Addr()), adminClient(primary.Addr())
	r.conns = append(r.conns, rc, pc)
	lh, lp, err := net.SplitHostPort(link.Addr())
	if err != nil {
		return err
	}
	if err := rc.Do(ctx, "REPLICAOF", lh, lp).Err(); err != nil {
		return fmt.Errorf("replicaof: %w", err)
	}
	if err := waitReplicaUp(ctx, rc, 10*time.Second); err != nil {
		return err
	}
	d := r.opts.Duration
	if err := r.workload(ctx, ScenarioClients, d/3, nil); err != nil {
		return err
	}
	// The replica has every write so far; from now on it gets none.
	if n, err := pc.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n < 1 {
		if err == nil {
			err = fmt.Errorf("WAIT 1 answered %d", n)
		}
		return fmt.Errorf("the replica did not catch up before the blackhole: %w", err)
	}
	endRepl := r.fault("replication n0 -> n1 blackholed")
	if err := link.Blackhole(); err != nil {
		return err
	}
	a := r.acquire(ctx, 0, time.Now().Add(2*time.Second), false)
	if a == nil {
		r.fact("A never acquired")
		return nil
	}
	r.name("A.acquire", a.op)
	r.name("A.write", r.fencedWrite(ctx, 0, a.op, "A"))
	// The failover: the replica is promoted and every client now reaches
	// it in the primary's place. The old primary is killed once B has
	// acquired, so that a slow docker kill does not eat A's lease.
	endFail := r.fault("failover: replica n1 promoted, clients retargeted, primary n0 killed")
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promoting the replica: %w", err)
	}
	for c := range ScenarioClients {
		if err := r.nw.Retarget(c, 0, replica.Addr()); err != nil {
			return err
		}
	}
	b := r.acquire(ctx, 1, a.lease.ValidUntil(), false)
	if b != nil {
		r.name("B.acquire", b.op)
		r.name("B.write", r.fencedWrite(ctx, 1, b.op, "B"))
	}
	if err := r.kill(ctx, primary); err != nil {
		return err
	}
	endFail()
	r.name("A.late", r.fencedWrite(ctx, 0, a.op, "A-late"))
	r.release(ctx, 0, a)
	if b != nil {
		r.release(ctx, 1, b)
	}
	endRepl()
	r.healed()
	return r.workload(ctx, ScenarioClients, d/3, nil)
}

// waitReplicaUp waits until the replica reports its link to the primary up.
func waitReplicaUp(ctx context.Context, rc *redis.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if !time.Now().Before(deadline) {
			if err == nil {
				err = errors.New("master_link_status is not up")
			}
			return fmt.Errorf("the replica's link to the primary did not come up within %v: %w", timeout, err)
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

func checkFailover(r *run, v *verdict) {
	a, b, late, ok := tokenFacts(r, v)
	if !ok {
		return
	}
	v.want(b.Return < a.ValidUntil, "B did not acquire while A's lease was valid")
	v.want(v.res.DoubleGrants >= 1, "no double grant recorded, want >= 1")
	fencingHeld(v, a, b, late)
}

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
		play:   playClockJump,
		check:  checkClockJump,
	}
}

func playClockJump(ctx context.Context, r *run) error {
	n2 := r.nodes[2]
	return r.overlapping(ctx, nil, func(ctx context.Context) error {
		// The jump is for good: keys set afterwards expire on time, while
		// jumping back would make them outlive their TTL.
		end := r.fault("n2's clock jumps %v forward", 2*ScenarioTTL)
		defer end()
		cctx, cancel := nodeCtx(ctx)
		defer cancel()
		return n2.SetClockOffset(cctx, 2*ScenarioTTL)
	}, func(a *scriptedAcquire) time.Time { return a.lease.ValidUntil() })
}

func checkClockJump(r *run, v *verdict) {
	a, b, late, ok := tokenFacts(r, v)
	if !ok {
		return
	}
	v.want(b.Return < a.ValidUntil, "B did not acquire while A's lease was valid")
	v.want(v.res.DoubleGrants >= 1, "no double grant recorded, want >= 1")
	fencingHeld(v, a, b, late)
}

// --- 9: the isolated holder ---

// scenario9 is scenario 9, partition isolating the holder while it keeps the lease alive.
func scenario9() Scenario {
	return Scenario{
		Name:   "9",
		Title:  "partition isolating the holder while it keeps the lease alive",
		Steps:  "Three clients run the workload; after a warm-up a scripted fourth takes the lock (the others paused for that moment) and runs KeepAlive; after two extends it is cut off from every node (Isolate). When a newer holder has written the fenced resource, it writes with its old token.",
		Expect: "KeepAlive returns ErrLost and Done closes BEFORE its ValidUntil; the others acquire only after that validity (0 double grants); its late write is REJECTED.",
		Why:    "KeepAlive gives the lease up a loss margin before it expires, so the holder learns of the loss while still valid (docs/design.md, Keep-alive and loss detection); fencing covers whatever it does late.",
		Locks:  []string{LockRedlock},
		play:   playIsolatedHolder,
		check:  checkIsolatedHolder,
	}
}

func playIsolatedHolder(ctx context.Context, r *run) error {
	const a = 3
	acq, err := r.warmThenAcquire(ctx, a, true)
	if err != nil || acq == nil {
		return err
	}
	return r.alongside(ctx, a, r.opts.Duration-scriptWarmup, 300*time.Millisecond, func(ctx context.Context) error {
		kctx, stop := context.WithCancel(ctx)
		kept := make(chan error, 1)
		go func() { kept <- acq.lease.KeepAlive(kctx) }()
		// Two extends (every TTL/3) succeed before the partition.
		sleepUntil(ctx, acq.ret.Add(ScenarioTTL*8/10))
		end := r.fault("client %d isolated from every node", a)
		if err := r.nw.Isolate(a); err != nil { //nolint:contextcheck // Network takes no context: it changes in-process proxies
			stop()
			if kErr := <-kept; kErr != nil && !errors.Is(kErr, context.Canceled) {
				err = errors.Join(err, kErr)
			}
			r.name("A.acquire", acq.complete(r.h, acq.lease.ValidUntil()))
			return err
		}
		t := time.NewTimer(3 * ScenarioTTL)
		var doneAt time.Time
		select {
		case <-acq.lease.Done():
			doneAt = time.Now()
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		validUntil := acq.lease.ValidUntil()
		stop()
		kErr := <-kept
		op := r.name("A.acquire", acq.complete(r.h, validUntil))
		r.release(ctx, a, acq)
		lostEarly := !doneAt.IsZero() && doneAt.Before(validUntil)
		errLost := errors.Is(kErr, redlock.ErrLost)
		r.flag("lost-before-validity", lostEarly)
		r.flag("keepalive-errlost", errLost)
		said := "KeepAlive returned ErrLost"
		if !errLost {
			said = fmt.Sprintf("KeepAlive returned %v", kErr)
		}
		if lostEarly {
			r.fact("%s; Done closed %v before ValidUntil", said, validUntil.Sub(doneAt).Round(time.Millisecond))
		} else {
			r.fact("%s; Done did not close before ValidUntil", said)
		}
		r.waitFor(ctx, 3*time.Second, func(ops []Op) bool {
			for _, o := range ops {
				if o.Kind == FencedWrite && o.Status == OK && o.Token > op.Token {
					return true
				}
			}
			return false
		})
		r.name("A.late", r.fencedWrite(ctx, a, op, fmt.Sprintf("c%d-late", a)))
		err := r.nw.Partition(a, allNodes(len(r.nodes))...) //nolint:contextcheck // Network takes no context: it changes in-process proxies
		end()
		r.healed()
		return err
	})
}

func checkIsolatedHolder(r *run, v *verdict) {
	acq, ok1 := r.op("A.acquire")
	late, ok2 := r.op("A.late")
	if !ok1 || !ok2 {
		v.want(false, "the scripted holder did not run")
		return
	}
	extends := acq.ValidUntil - acq.Return
	v.want(extends > ScenarioTTL, "the holder's lease was never extended before the partition")
	v.want(r.flagged("keepalive-errlost"), "KeepAlive did not return ErrLost")
	v.want(r.flagged("lost-before-validity"), "the holder did not learn of the loss before its ValidUntil")
	rejected := late.Status == Fail && late.Note == NoteStale
	v.fact("its late write (token %d) %s", acq.Token, verdictWord(rejected, "REJECTED", "ACCEPTED"))
	v.want(rejected, "the isolated holder's late write was not rejected")
}

// --- 10: slow nodes ---

// scenario10 is scenario 10, slow nodes.
func scenario10() Scenario {
	return Scenario{
		Name:   "10",
		Title:  "slow nodes",
		Steps:  "First half: 250ms of latency on n0 for every client (above the 100ms per-node timeout). Second half: 900ms (near the 1s TTL) on n0, n1 and n2.",
		Expect: "First half: grants continue through the other four, 0 double grants. Second half: every acquire fails; no lease is ever returned without validity (every granted acquire has ValidUntil after its return).",
		Why:    "A lease is returned only with a majority within the per-node timeout and positive validity, TTL - elapsed - drift (docs/design.md, Acquire; NoLeaseWithoutValidity).",
		Locks:  []string{LockRedlock},
		play:   playSlowNodes,
		check:  checkSlowNodes,
	}
}

func playSlowNodes(ctx context.Context, r *run) error {
	d := r.opts.Duration
	return r.workload(ctx, ScenarioClients, d, func(wctx context.Context, start time.Time) error {
		end := r.fault("latency 250ms on n0 for every client")
		for c := range ScenarioClients {
			if err := r.nw.Latency(c, 0, 250*time.Millisecond); err != nil { //nolint:contextcheck // Network takes no context: it changes in-process proxies
				return err
			}
		}
		r.mark("slow")
		if !sleepUntil(wctx, start.Add(d/2)) {
			return nil
		}
		end()
		end = r.fault("latency 900ms on n0, n1, n2 for every client")
		for c := range ScenarioClients {
			for n := range 3 {
				if err := r.nw.Latency(c, n, 900*time.Millisecond); err != nil { //nolint:contextcheck // Network takes no context: it changes in-process proxies
					return err
				}
			}
		}
		r.mark("slower")
		<-wctx.Done()
		end()
		return nil
	})
}

func checkSlowNodes(r *run, v *verdict) {
	slow, ok1 := r.markAt("slow")
	slower, ok2 := r.markAt("slower")
	if !ok1 || !ok2 {
		v.want(false, "the latency phases did not both happen")
		return
	}
	g1 := grantsBetween(v.ops, slow, slower)
	late, failed := 0, 0
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Call >= slower {
			if op.Status == OK {
				late++
			} else {
				failed++
			}
		}
	}
	v.fact("%d grants with one slow node; with a slow majority %d acquires failed, %d granted", g1, failed, late)
	v.want(g1 > 0, "no grant while one node was slow")
	v.want(late == 0, "%d acquires granted with a slow majority, want 0", late)
	v.want(failed > 0, "no acquire was attempted with a slow majority")
}

// --- 11: bridge ---

// scenario11 is scenario 11, bridge partition.
func scenario11() Scenario {
	return Scenario{
		Name:   "11",
		Title:  "bridge partition",
		Steps:  "For the whole run clients 0 and 1 reach only {n0,n1,n2}, clients 2 and 3 only {n2,n3,n4} (Jepsen's bridge): both groups contend.",
		Expect: "0 double grants, 0 violations: every majority the two groups can form contains n2.",
		Why:    "Any two majorities of the same five nodes intersect; the node in the middle serialises the groups.",
		Locks:  []string{LockRedlock},
		play:   playBridge,
		check:  checkBridge,
	}
}

func playBridge(ctx context.Context, r *run) error {
	return r.workload(ctx, ScenarioClients, r.opts.Duration, func(wctx context.Context, _ time.Time) error {
		end := r.fault("bridge: clients 0,1 reach {n0,n1,n2}, clients 2,3 reach {n2,n3,n4}")
		err := errors.Join(r.nw.Partition(0, 0, 1, 2), r.nw.Partition(1, 0, 1, 2), //nolint:contextcheck // Network takes no context: it changes in-process proxies
			r.nw.Partition(2, 2, 3, 4), r.nw.Partition(3, 2, 3, 4)) //nolint:contextcheck // Network takes no context: it changes in-process proxies
		if err != nil {
			return err
		}
		<-wctx.Done()
		end()
		return nil
	})
}

func checkBridge(_ *run, v *verdict) {
	var left, right int
	for _, op := range v.ops {
		if op.Kind == Acquire && op.Status == OK {
			if op.Client < 2 {
				left++
			} else {
				right++
			}
		}
	}
	v.fact("grants: %d to clients 0-1, %d to clients 2-3", left, right)
}

// --- 12: connection resets ---

// scenario12 is scenario 12, connection resets mid-command.
func scenario12() Scenario {
	return Scenario{
		Name:   "12",
		Title:  "connection resets mid-command",
		Steps:  "Three clients run the workload; after a warm-up a scripted fourth takes the lock (the others paused for that moment); then its links to n0, n1 and n2, and random links of the others, reset every reply (TCP RST after the command ran) for 1s; it releases meanwhile.",
		Expect: "Its release, whose replies were lost after the deletes ran, is recorded Unknown (ambiguous), as is every release like it; 0 double grants; no lock key outlives its TTL.",
		Why:    "A lost reply does not mean the command did not run: redfence counts it as a failure, cleans up on every node, and keys expire by TTL whatever happens (docs/design.md, Acquire step 6, Release).",
		Locks:  []string{LockRedlock},
		play:   playResets,
		check:  checkResets,
	}
}

func playResets(ctx context.Context, r *run) error {
	const a = 3
	acq, err := r.warmThenAcquire(ctx, a, false)
	if err != nil || acq == nil {
		return err
	}
	r.name("A.acquire", acq.op)
	return r.alongside(ctx, a, r.opts.Duration-scriptWarmup, 500*time.Millisecond, func(ctx context.Context) error {
		type link struct{ c, n int }
		links := []link{{a, 0}, {a, 1}, {a, 2}}
		for c := range a {
			for _, n := range r.rng.Perm(len(r.nodes))[:1+r.rng.IntN(3)] {
				links = append(links, link{c, n})
			}
		}
		var desc []string
		for _, l := range links {
			desc = append(desc, fmt.Sprintf("c%d-n%d", l.c, l.n))
		}
		end := r.fault("connection resets on %s", strings.Join(desc, " "))
		for _, l := range links {
			if err := r.nw.Reset(l.c, l.n); err != nil {
				return err
			}
		}
		r.name("A.release", r.release(ctx, a, acq))
		sleepUntil(ctx, time.Now().Add(time.Second))
		var errs []error
		for _, l := range links {
			errs = append(errs, r.nw.Heal(l.c, l.n))
		}
		end()
		r.healed()
		return errors.Join(errs...)
	})
}

func checkResets(r *run, v *verdict) {
	rel, ok := r.op("A.release")
	if !ok {
		v.want(false, "the scripted release did not run")
		return
	}
	unknown := 0
	for _, op := range v.ops {
		if op.Status == Unknown && op.Kind != Fault {
			unknown++
		}
	}
	v.fact("%d operations recorded Unknown; the scripted release: %v", unknown, rel.Status)
	v.want(rel.Status == Unknown, "the release whose replies were reset was recorded %v, want unknown", rel.Status)
}

// --- 13: random faults ---

// scenario13 is scenario 13, random fault schedule (seeded).
func scenario13() Scenario {
	return Scenario{
		Name:   "13",
		Title:  "random fault schedule (seeded)",
		Steps:  "Nodes run with appendfsync always. For twice the usual duration, every 200-500ms a seeded schedule starts one fault for 200-900ms on a random node: kill and restart (15%), pause (25%), a cut link from one client (30%), or latency for every client (30%); at most two nodes are disturbed at once (a restarted node counts until its quarantine ends).",
		Expect: "0 double grants, 0 fenced violations, unique increasing tokens, 0 lost updates. On failure the seed, history and checker output are saved.",
		Why:    "Faults within the model (a disturbed minority, no lost writes) must never break safety, in any order.",
		Locks:  []string{LockRedlock},
		spec:   NodeSpec{Persistence: AOFAlways},
		play:   playRandom,
		check:  checkRandom,
	}
}

// activeFault is one fault of the random schedule.
type activeFault struct {
	node  int
	until time.Time
	heal  func() error // nil for a restarted node's quarantine
	end   func()
}

func playRandom(ctx context.Context, r *run) error {
	rng := rand.New(rand.NewPCG(uint64(r.opts.Seed), 13))
	counts := map[string]int{}
	err := r.workload(ctx, ScenarioClients, 2*r.opts.Duration, func(wctx context.Context, start time.Time) error {
		var active, added []activeFault
		healDue := func(now time.Time, all bool) error {
			var errs []error
			var keep []activeFault
			for _, f := range active {
				if !all && now.Before(f.until) {
					keep = append(keep, f)
					continue
				}
				if f.heal != nil {
					errs = append(errs, f.heal())
				}
				f.end()
			}
			active, added = append(keep, added...), nil
			return errors.Join(errs...)
		}
		next := start.Add(200 * time.Millisecond)
		for {
			ev := next
			for _, f := range active {
				if f.until.Before(ev) {
					ev = f.until
				}
			}
			if !sleepUntil(wctx, ev) {
				break
			}
			now := time.Now()
			if err := healDue(now, false); err != nil {
				return err
			}
			if now.Before(next) {
				continue
			}
			next = now.Add(time.Duration(200+rng.IntN(300)) * time.Millisecond)
			busy := map[int]bool{}
			for _, f := range active {
				busy[f.node] = true
			}
			if len(busy) >= 2 {
				continue
			}
			var free []int
			for n := range r.nodes {
				if !busy[n] {
					free = append(free, n)
				}
			}
			n := free[rng.IntN(len(free))]
			node := r.nodes[n]
			until := now.Add(time.Duration(200+rng.IntN(700)) * time.Millisecond)
			f := activeFault{node: n, until: until}
			switch kind := rng.IntN(100); {
			case kind < 15:
				f.end = r.fault("kill %s", node.Name())
				if err := r.kill(ctx, node); err != nil {
					return err
				}
				f.heal = func() error {
					if err := r.restart(ctx, node); err != nil {
						return err
					}
					// It sits out the quarantine: still disturbed.
					added = append(added, activeFault{node: n, until: time.Now().Add(ScenarioQuarantine + time.Second), end: r.fault("%s in restart quarantine", node.Name())})
					return nil
				}
				counts["kill"]++
			case kind < 40:
				f.end = r.fault("pause %s", node.Name())
				if err := r.pause(ctx, node); err != nil {
					return err
				}
				f.heal = func() error { return r.resume(ctx, node) }
				counts["pause"]++
			case kind < 70:
				c := rng.IntN(ScenarioClients)
				f.end = r.fault("cut c%d -> %s", c, node.Name())
				if err := r.nw.Cut(c, n); err != nil {
					return err
				}
				f.heal = func() error { return r.nw.Heal(c, n) }
				counts["cut"]++
			default:
				lat := time.Duration(150+rng.IntN(250)) * time.Millisecond
				f.end = r.fault("latency %v on %s", lat, node.Name())
				for c := range ScenarioClients {
					if err := r.nw.Latency(c, n, lat); err != nil { //nolint:contextcheck // Network takes no context: it changes in-process proxies
						return err
					}
				}
				f.heal = func() error { //nolint:contextcheck // Network takes no context: it changes in-process proxies
					var errs []error
					for c := range ScenarioClients {
						errs = append(errs, r.nw.Latency(c, n, 0))
					}
					return errors.Join(errs...)
				}
				counts["latency"]++
			}
			active = append(active, f)
		}
		// The run is over: heal what is left (a restart adds a quarantine
		// entry, healed by the second pass).
		return errors.Join(healDue(time.Now(), true), healDue(time.Now(), true))
	})
	r.fact("faults: %d kills, %d pauses, %d cuts, %d latencies (seed %d)", counts["kill"], counts["pause"], counts["cut"], counts["latency"], r.opts.Seed)
	return err
}

func checkRandom(*run, *verdict) {}
