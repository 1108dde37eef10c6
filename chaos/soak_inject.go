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
	ctx     context.Context
	r       *run
	targets []Node        // the nodes faults hit, in the network's order
	sent    *soakSentinel // single over Sentinel; nil otherwise
	// settle puts the deployment back together after node faults
	// (soakSentinel.settle); nil: nothing to do.
	settle func(ctx context.Context) error
	open   int         // node faults (kill, restart, pause) not yet healed
	offset map[int]int // clock jumps so far, by target
	// flushRestart makes restarts without persistence use the isolated
	// start and FLUSHALL even where the node could start without its files
	// (for the test of that path).
	flushRestart bool
}

// settled wraps the heal of a fault on a node, which has started: on
// Sentinel, once the last node fault has healed, the deployment is put back
// together before the nemesis goes on (see soakSentinel.settle); while
// another node is still down or frozen it could not be.
func (in *runInjector) settled(heal func() error) func() error {
	in.open++
	return func() error {
		in.open--
		if err := heal(); err != nil || in.settle == nil || in.open > 0 {
			return err
		}
		return in.settle(in.ctx)
	}
}

func (in *runInjector) start(p *faultPlan) (func() error, error) {
	r, ctx := in.r, in.ctx
	node := in.targets[p.node]
	name := node.Name()
	switch p.kind {
	case faultKill:
		end := r.fault("kill %s", name)
		if err := r.kill(ctx, node); err != nil {
			return nil, err
		}
		// Back up, the node sits out its quarantine: the nemesis counts it
		// as disturbed until then.
		return in.settled(func() error { defer end(); return r.restart(ctx, node) }), nil
	case faultRestartEmpty:
		end := r.fault("kill %s, restart without persistence", name)
		if err := r.kill(ctx, node); err != nil {
			return nil, err
		}
		return in.settled(func() error { defer end(); return in.restartEmpty(ctx, p.node) }), nil
	case faultPause:
		end := r.fault("pause %s", name)
		if err := r.pause(ctx, node); err != nil {
			return nil, err
		}
		return in.settled(func() error { defer end(); return r.resume(ctx, node) }), nil
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
		return nil, in.wipe(p)
	case faultClock:
		return nil, in.clockJump(p)
	case faultFailover:
		if in.sent == nil {
			return nil, errors.New("chaos: soak: a failover needs Sentinel")
		}
		end := r.fault("SENTINEL FAILOVER")
		defer end()
		old, err := in.sent.failover(ctx)
		if old >= 0 {
			p.node = old
		}
		return nil, err
	}
	return nil, fmt.Errorf("chaos: soak: unknown fault %d", p.kind)
}

// wipe runs FLUSHALL on the target, or on Sentinel on the primary (a
// replica refuses writes; the primary's FLUSHALL reaches the replica).
func (in *runInjector) wipe(p *faultPlan) error {
	r, ctx := in.r, in.ctx
	if in.sent != nil {
		i, err := in.sent.agreed(ctx)
		if err != nil {
			return fmt.Errorf("wipe: finding the primary: %w", err)
		}
		p.node = i
	}
	node := in.targets[p.node]
	end := r.fault("FLUSHALL on %s", node.Name())
	defer end()
	return r.onNode(ctx, node, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
}

// clockJump moves the target's clock forward by 2 TTLs, or on Sentinel
// every node's (one host's clock: fencing's clock floor assumes the nodes'
// clocks agree, docs/fencing.md; the lock's assumption is what breaks).
// Forward only, and for good: a clock set back would make keys outlive
// their TTL and lower the tokens it floors (scenario 8).
func (in *runInjector) clockJump(p *faultPlan) error {
	r, ctx := in.r, in.ctx
	jump := []int{p.node}
	what := in.targets[p.node].Name() + "'s clock"
	if in.sent != nil {
		jump, what = []int{0, 1}, "every node's clock"
	}
	end := r.fault("%s jumps %v forward", what, 2*scenarioTTL)
	defer end()
	cctx, cancel := nodeCtx(ctx)
	defer cancel()
	var errs []error
	for _, i := range jump {
		in.offset[i]++
		errs = append(errs, in.targets[i].SetClockOffset(cctx, 2*scenarioTTL*time.Duration(in.offset[i])))
	}
	return errors.Join(errs...)
}
