package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redfence/redfence/redlock"
)

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
		script: newScript(playIsolatedHolder, checkIsolatedHolder),
	}
}

// isolatedHolder is scenario 9's state: the scripted holder's acquire and
// late write, and what it learnt of the loss.
type isolatedHolder struct {
	holder
	lostEarly bool // Done closed before the lease's ValidUntil
	errLost   bool // KeepAlive returned ErrLost
}

func playIsolatedHolder(ctx context.Context, r *run, s *isolatedHolder) error {
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
		sleepUntil(ctx, acq.ret.Add(scenarioTTL*8/10))
		end := r.fault("client %d isolated from every node", a)
		if err := r.nw.Isolate(a); err != nil { // Network takes no context: it changes in-process proxies
			stop()
			if kErr := <-kept; kErr != nil && !errors.Is(kErr, context.Canceled) {
				err = errors.Join(err, kErr)
			}
			s.acquire = opRef(acq.complete(r.h, acq.lease.ValidUntil()))
			return err
		}
		t := time.NewTimer(3 * scenarioTTL)
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
		op := acq.complete(r.h, validUntil)
		s.acquire = &op
		r.release(ctx, a, acq)
		s.lostEarly = !doneAt.IsZero() && doneAt.Before(validUntil)
		s.errLost = errors.Is(kErr, redlock.ErrLost)
		said := "KeepAlive returned ErrLost"
		if !s.errLost {
			said = fmt.Sprintf("KeepAlive returned %v", kErr)
		}
		if s.lostEarly {
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
		s.late = opRef(r.fencedWrite(ctx, a, op, fmt.Sprintf("c%d-late", a)))
		err := r.nw.Partition(a, allNodes(len(r.nodes))...) // Network takes no context: it changes in-process proxies
		end()
		r.healed()
		return err
	})
}

func checkIsolatedHolder(_ *run, v *verdict, s *isolatedHolder) {
	acq, rejected, ok := s.outcome(v, "the scripted holder did not run")
	if !ok {
		return
	}
	extends := acq.ValidUntil - acq.Return
	v.want(extends > scenarioTTL, "the holder's lease was never extended before the partition")
	v.want(s.errLost, "KeepAlive did not return ErrLost")
	v.want(s.lostEarly, "the holder did not learn of the loss before its ValidUntil")
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
		script: newScript(playSlowNodes, checkSlowNodes),
	}
}

func playSlowNodes(ctx context.Context, r *run, w *window) error {
	d := r.opts.Duration
	return r.workload(ctx, scenarioClients, d, func(wctx context.Context, start time.Time) error {
		end := r.fault("latency 250ms on n0 for every client")
		for c := range scenarioClients {
			if err := r.nw.Latency(c, 0, 250*time.Millisecond); err != nil { // Network takes no context: it changes in-process proxies
				return err
			}
		}
		w.from.mark(r)
		if !sleepUntil(wctx, start.Add(d/2)) {
			return nil
		}
		end()
		end = r.fault("latency 900ms on n0, n1, n2 for every client")
		for c := range scenarioClients {
			for n := range 3 {
				if err := r.nw.Latency(c, n, 900*time.Millisecond); err != nil { // Network takes no context: it changes in-process proxies
					return err
				}
			}
		}
		w.to.mark(r)
		<-wctx.Done()
		end()
		return nil
	})
}

// checkSlowNodes reads w as the two phases' starts: from, one slow node;
// to, a slow majority.
func checkSlowNodes(_ *run, v *verdict, w *window) {
	if !w.complete() {
		v.want(false, "the latency phases did not both happen")
		return
	}
	slower := w.to.at
	g1 := grantsBetween(v.ops, w.from.at, slower)
	late, failed := countAcquires(v.ops, func(op Op) bool { return op.Call >= slower })
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
		script: newScript(playBridge, checkBridge),
	}
}

func playBridge(ctx context.Context, r *run, _ *noState) error {
	return r.workload(ctx, scenarioClients, r.opts.Duration, func(wctx context.Context, _ time.Time) error {
		end := r.fault("bridge: clients 0,1 reach {n0,n1,n2}, clients 2,3 reach {n2,n3,n4}")
		err := errors.Join(r.nw.Partition(0, 0, 1, 2), r.nw.Partition(1, 0, 1, 2), // Network takes no context: it changes in-process proxies
			r.nw.Partition(2, 2, 3, 4), r.nw.Partition(3, 2, 3, 4)) // Network takes no context: it changes in-process proxies
		if err != nil {
			return err
		}
		<-wctx.Done()
		end()
		return nil
	})
}

func checkBridge(_ *run, v *verdict, _ *noState) {
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
		script: newScript(playResets, checkResets),
	}
}

// resets is scenario 12's state: the scripted release under resets.
type resets struct{ release *Op }

func playResets(ctx context.Context, r *run, s *resets) error {
	const a = 3
	acq, err := r.warmThenAcquire(ctx, a, false)
	if err != nil || acq == nil {
		return err
	}
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
		s.release = opRef(r.release(ctx, a, acq))
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

func checkResets(_ *run, v *verdict, s *resets) {
	if s.release == nil {
		v.want(false, "the scripted release did not run")
		return
	}
	rel := *s.release
	unknown := 0
	for _, op := range v.ops {
		if op.Status == Unknown && op.Kind != Fault {
			unknown++
		}
	}
	v.fact("%d operations recorded Unknown; the scripted release: %v", unknown, rel.Status)
	v.want(rel.Status == Unknown, "the release whose replies were reset was recorded %v, want unknown", rel.Status)
}
