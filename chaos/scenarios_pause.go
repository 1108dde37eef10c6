package chaos

import (
	"context"
	"fmt"
	"time"
)

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
		script:       newScript(playPausedHolder, checkPausedHolder),
	}
}

// holder is the state of a scripted holder (scenarios 4 and 9): its
// acquire and its late fenced write.
type holder struct{ acquire, late *Op }

// outcome returns the holder's acquire and whether its late write was
// rejected as stale; ok is false, and v fails saying missing, when the
// script did not get that far.
func (s *holder) outcome(v *verdict, missing string) (acq Op, rejected, ok bool) {
	if s.acquire == nil || s.late == nil {
		v.want(false, "%s", missing)
		return acq, false, false
	}
	return *s.acquire, staleRejected(*s.late), true
}

func playPausedHolder(ctx context.Context, r *run, s *holder) error {
	const a = 3 // the scripted client
	acq, err := r.warmThenAcquire(ctx, a, false)
	if err != nil || acq == nil {
		return err
	}
	s.acquire = opRef(acq.op)
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
		s.late = opRef(r.fencedWrite(ctx, a, acq.op, fmt.Sprintf("c%d-late", a)))
		err = r.control.Set(ctx, v+1)
		st := OK
		if err != nil {
			st = Unknown
		}
		p.Complete(st, WithLease(acq.op.ID), WithValue(fmt.Sprintf("%d->%d", v, v+1)), WithErr(err), WithNote("after the pause"))
		r.release(ctx, a, acq)
		return nil
	})
}

func checkPausedHolder(_ *run, v *verdict, s *holder) {
	acq, rejected, ok := s.outcome(v, "the scripted pause did not run")
	if !ok {
		return
	}
	late := *s.late
	v.fact("paused client's token %d; its late fenced write %s; %d updates lost in the control", acq.Token, verdictWord(rejected, "REJECTED", "ACCEPTED"), v.res.LostUpdates)
	v.want(rejected, "the paused client's late fenced write was not rejected (status %v)", late.Status)
	v.want(v.res.FencedRejected >= 1, "no stale write rejected")
	v.want(v.res.LostUpdates >= 1, "the unfenced control lost no update")
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
		script: newScript(playPausedNode, checkPausedNode),
	}
}

func playPausedNode(ctx context.Context, r *run, w *window) error {
	d := r.opts.Duration
	return r.playOutage(ctx, d, outage{
		what:    "pause n0 for 1s",
		victims: []Node{r.nodes[0]},
		at:      d / 3,
		lasts:   time.Second,
		begin:   r.pause,
		// r.resume detaches from ctx: a frozen node must not outlive the run.
		finish: r.resume,
	}, w)
}

func checkPausedNode(_ *run, v *verdict, w *window) {
	g, a, ok := grantsDuring(v, w, "the pause did not happen within the run")
	if !ok {
		return
	}
	v.fact("%d grants while n0 was frozen; availability then %.0f%%, over the run %.0f%%", g, a*100, v.res.Availability*100)
	// Liveness, not a rate: a rate threshold would flake on a loaded machine.
	v.want(g > 0, "no grant while n0 was frozen: the other four must keep granting")
}
