package chaos

import (
	"context"
	"time"
)

// outage is a fault on some nodes for a window of a workload run
// (scenarios 2, 3 and 5).
type outage struct {
	what    string        // the fault, as recorded in the history
	victims []Node        // the nodes it disturbs
	at      time.Duration // when it begins, after the workload's start
	// begin and finish start and end the fault on one victim; each runs
	// on every victim in parallel.
	begin, finish func(ctx context.Context, n Node) error
	// hold waits while the fault lasts; false: the run ended first, and
	// the fault is left to the run's finish.
	hold func(wctx context.Context, start time.Time) bool
}

// playOutage runs every client's workload for d with o's fault, recording
// its window in w: from once every victim is disturbed, to just before
// they are restored. Its end is the run's heal.
func (r *run) playOutage(ctx context.Context, d time.Duration, o outage, w *window) error {
	return r.workload(ctx, ScenarioClients, d, func(wctx context.Context, start time.Time) error {
		if !sleepUntil(wctx, start.Add(o.at)) {
			return nil
		}
		end := r.fault("%s", o.what)
		if err := each(o.victims, func(n Node) error { return o.begin(ctx, n) }); err != nil {
			return err
		}
		w.from.mark(r)
		if !o.hold(wctx, start) {
			return nil
		}
		w.to.mark(r)
		if err := each(o.victims, func(n Node) error { return o.finish(ctx, n) }); err != nil {
			return err
		}
		end()
		r.healed()
		return nil
	})
}

// holdUntil is an outage's hold until at after the workload's start.
func holdUntil(at time.Duration) func(wctx context.Context, start time.Time) bool {
	return func(wctx context.Context, start time.Time) bool { return sleepUntil(wctx, start.Add(at)) }
}

// grantsDuring counts the grants in w and the availability then (see
// availabilityBetween); ok is false, and v fails saying missing, when the
// play did not complete w.
func grantsDuring(v *verdict, w *window, missing string) (grants int, availability float64, ok bool) {
	if !w.complete() {
		v.want(false, "%s", missing)
		return 0, 0, false
	}
	return grantsBetween(v.ops, w.from.at, w.to.at), availabilityBetween(v.ops, w.from.at, w.to.at, DefaultAvailabilityWindow), true
}
