package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// runInjector injects the soak nemesis's faults into a run, each as a
// fault window in the history.
type runInjector struct {
	ctx    context.Context
	r      *run
	offset map[int]int // clock jumps so far, by node
}

func (in *runInjector) start(p faultPlan) (func() error, error) {
	r, ctx := in.r, in.ctx
	node := r.nodes[p.node]
	name := node.Name()
	switch p.kind {
	case faultKill:
		end := r.fault("kill %s", name)
		if err := r.kill(ctx, node); err != nil {
			return nil, err
		}
		// Back up, the node sits out its quarantine: the nemesis counts it
		// as disturbed until then.
		return func() error { defer end(); return r.restart(ctx, node) }, nil
	case faultPause:
		end := r.fault("pause %s", name)
		if err := r.pause(ctx, node); err != nil {
			return nil, err
		}
		return func() error { defer end(); return r.resume(ctx, node) }, nil
	case faultCut, faultBlackhole, faultReset:
		end := r.fault("%s c%d -> %s", p.kind, p.client, name)
		do := map[soakFault]func(c, n int) error{faultCut: r.nw.Cut, faultBlackhole: r.nw.Blackhole, faultReset: r.nw.Reset}[p.kind]
		if err := do(p.client, p.node); err != nil { // Network takes no context: it changes in-process proxies
			return nil, err
		}
		return func() error { defer end(); return r.nw.Heal(p.client, p.node) }, nil
	case faultLatency:
		end := r.fault("latency %v on %s", p.latency, name)
		for c := range r.nw.Clients() {
			if err := r.nw.Latency(c, p.node, p.latency); err != nil {
				return nil, err
			}
		}
		return func() error {
			defer end()
			var errs []error
			for c := range r.nw.Clients() {
				errs = append(errs, r.nw.Latency(c, p.node, 0))
			}
			return errors.Join(errs...)
		}, nil
	case faultWipe:
		end := r.fault("FLUSHALL on %s", name)
		defer end()
		return nil, r.onNode(ctx, node, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
	case faultClock:
		// Forward only, and for good: a clock set back would make keys
		// outlive their TTL and lower the tokens it floors (scenario 8).
		in.offset[p.node]++
		end := r.fault("%s's clock jumps %v forward", name, 2*ScenarioTTL)
		defer end()
		cctx, cancel := nodeCtx(ctx)
		defer cancel()
		return nil, node.SetClockOffset(cctx, 2*ScenarioTTL*time.Duration(in.offset[p.node]))
	}
	return nil, fmt.Errorf("chaos: soak: unknown fault %d", p.kind)
}
