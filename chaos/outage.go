package chaos

import (
	"context"
	"time"
)

// outage is a fault on some nodes for a window of a workload run
// (scenarios 2, 3 and 5). Its times are measured from when each step is
// done, not from the run's start: on a loaded machine a docker kill or
// start can take a second, and a window fixed to the run's clock would
// shrink to nothing.
type outage struct {
	what    string        // the fault, as recorded in the history
	victims []Node        // the nodes it disturbs
	at      time.Duration // when it begins, after the workload's start
	lasts   time.Duration // how long it lasts once every victim is disturbed
	tail    time.Duration // how long the workload goes on once every victim is restored
	// begin and finish start and end the fault on one victim; each runs
	// on every victim in parallel.
	begin, finish func(ctx context.Context, n Node) error
}

// playOutage runs every client's workload for at least d with o's fault,
// and for at least o.tail after the fault ends, recording its window in
// w: from once every victim is disturbed, to just before they are
// restored. Its end is the run's heal. The victims are restored even when
// ctx ends first (finish decides whether it needs a live ctx), so that a
// frozen node does not outlive the run.
func (r *run) playOutage(ctx context.Context, d time.Duration, o outage, w *window) error {
	start := time.Now()
	return r.alongside(ctx, scenarioClients, d, o.tail, func(ctx context.Context) error {
		if !sleepUntil(ctx, start.Add(o.at)) {
			return nil
		}
		end := r.fault("%s", o.what)
		if err := each(o.victims, func(n Node) error { return o.begin(ctx, n) }); err != nil {
			return err
		}
		w.from.mark(r)
		lasted := sleepUntil(ctx, time.Now().Add(o.lasts))
		if lasted {
			w.to.mark(r)
		}
		if err := each(o.victims, func(n Node) error { return o.finish(ctx, n) }); err != nil || !lasted {
			return err
		}
		end()
		r.healed()
		return nil
	})
}

// grantsDuring counts the grants in w and the availability then (see
// availabilityBetween); ok is false, and v fails saying missing, when the
// play did not complete w.
func grantsDuring(v *verdict, w *window, missing string) (grants int, availability float64, ok bool) {
	if !w.complete() {
		v.want(false, "%s", missing)
		return 0, 0, false
	}
	return grantsBetween(v.ops, w.from.at, w.to.at), availabilityBetween(v.ops, w.from.at, w.to.at, availabilityWindow), true
}
