package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

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
		script: newScript(playRandom, noCheck),
	}
}

// activeFault is one fault of the random schedule.
type activeFault struct {
	node  int
	until time.Time
	heal  func() error // nil for a restarted node's quarantine
	end   func()
}

func playRandom(ctx context.Context, r *run, _ *noState) error {
	rng := rand.New(rand.NewPCG(uint64(r.opts.Seed), 13))
	var counts struct{ kill, pause, cut, latency int } // faults started, by kind
	err := r.workload(ctx, scenarioClients, 2*r.opts.Duration, func(wctx context.Context, start time.Time) error {
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
					added = append(added, activeFault{node: n, until: time.Now().Add(scenarioQuarantine + time.Second), end: r.fault("%s in restart quarantine", node.Name())})
					return nil
				}
				counts.kill++
			case kind < 40:
				f.end = r.fault("pause %s", node.Name())
				if err := r.pause(ctx, node); err != nil {
					return err
				}
				f.heal = func() error { return r.resume(ctx, node) }
				counts.pause++
			case kind < 70:
				c := rng.IntN(scenarioClients)
				f.end = r.fault("cut c%d -> %s", c, node.Name())
				if err := r.nw.Cut(c, n); err != nil {
					return err
				}
				f.heal = func() error { return r.nw.Heal(c, n) }
				counts.cut++
			default:
				lat := time.Duration(150+rng.IntN(250)) * time.Millisecond
				f.end = r.fault("latency %v on %s", lat, node.Name())
				for c := range scenarioClients {
					if err := r.nw.Latency(c, n, lat); err != nil { // Network takes no context: it changes in-process proxies
						return err
					}
				}
				f.heal = func() error { // Network takes no context: it changes in-process proxies
					var errs []error
					for c := range scenarioClients {
						errs = append(errs, r.nw.Latency(c, n, 0))
					}
					return errors.Join(errs...)
				}
				counts.latency++
			}
			active = append(active, f)
		}
		// The run is over: heal what is left (a restart adds a quarantine
		// entry, healed by the second pass).
		return errors.Join(healDue(time.Now(), true), healDue(time.Now(), true))
	})
	r.fact("faults: %d kills, %d pauses, %d cuts, %d latencies (seed %d)", counts.kill, counts.pause, counts.cut, counts.latency, r.opts.Seed)
	return err
}
