package chaos_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/redlock"
)

// churnUnderFaults starts five Redlock nodes without persistence and has
// holders churn (see churn) for 4s while multiKeyNemesis plays its faults:
// holder id acquires with the function that acquirer returns for it, given
// a Client of its own over the nodes (faultClient with o). It returns each
// holder's operations, indexed by holder.
func churnUnderFaults(t *testing.T, holders int, acquirer func(c *redlock.Client, id int) func(context.Context) (*redlock.Lease, error), o ...redlock.Option) [][]chaos.Op {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backend := chaos.NewProcessBackend()
	defer func() { require.NoError(t, backend.Close()) }()
	nodes, err := backend.StartNodes(ctx, 5, chaos.NodeSpec{Persistence: chaos.NoPersistence})
	require.NoError(t, err)

	h := chaos.NewHistory()
	ops := make([][]chaos.Op, holders)
	run, stop := context.WithTimeout(ctx, 4*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for id := range holders {
		try := acquirer(faultClient(t, nodes, id == 0, o...), id)
		wg.Go(func() { ops[id] = churn(run, h, id, try) })
	}
	multiKeyNemesis(run, t, h, nodes)
	wg.Wait()
	return ops
}

// faultClient returns a Client of its own over nodes (1s TTL, 2s restart
// quarantine, keys prefixed with the test's name, and o), with it and its
// Redis clients closed when the test ends. The first one vouches for the
// brand-new nodes.
func faultClient(t *testing.T, nodes []chaos.Node, vouch bool, o ...redlock.Option) *redlock.Client {
	t.Helper()
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	lc, err := redlock.New(clients, append([]redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(50 * time.Millisecond),
		redlock.WithQuarantine(2 * time.Second), redlock.WithKeyPrefix(fmt.Sprintf("%s:", t.Name()))}, o...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lc.Close() })
	if vouch {
		require.NoError(t, lc.Vouch(t.Context()))
	}
	return lc
}

// churn acquires with try (TryLock, TryAcquire, Lock, RLock), holds the
// lease 10ms (less if its validity ends or it is lost) and releases it,
// again and again until ctx ends, recording every acquire and release in h
// as holder id.
func churn(ctx context.Context, h *chaos.History, id int, try func(context.Context) (*redlock.Lease, error)) []chaos.Op {
	var ops []chaos.Op
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		p := h.Invoke(id, chaos.Acquire)
		l, err := try(actx)
		cancel()
		if err != nil {
			ops = append(ops, p.Complete(chaos.Fail, chaos.WithErr(err)))
			chaos.Wait(ctx, 5*time.Millisecond, nil)
			continue
		}
		acq := p.Complete(chaos.OK, chaos.WithValidUntil(l.ValidUntil()), chaos.WithToken(l.Token()))
		ops = append(ops, acq)
		chaos.Wait(ctx, min(10*time.Millisecond, time.Until(l.ValidUntil())), l.Done())
		r := h.Invoke(id, chaos.Release)
		err = l.Release(context.WithoutCancel(ctx))
		st := chaos.OK
		if err != nil {
			st = chaos.Fail
		}
		ops = append(ops, r.Complete(st, chaos.WithLease(acq.ID), chaos.WithErr(err)))
	}
	return ops
}

// multiKeyNemesis plays the faults of the churn tests, each recorded in h,
// until ctx ends, and leaves every node running: it pauses a minority,
// kills a node and restarts it empty (the restart quarantine covers it),
// pauses one node past the TTL, and kills and restarts another.
func multiKeyNemesis(ctx context.Context, t *testing.T, h *chaos.History, nodes []chaos.Node) {
	op := context.WithoutCancel(ctx)
	step := func(note string, d time.Duration, fault, heal func()) {
		end := h.Fault(note)
		fault()
		chaos.Wait(ctx, d, nil)
		heal()
		end()
		chaos.Wait(ctx, 200*time.Millisecond, nil)
	}
	must := func(err error) { assert.NoError(t, err) }
	chaos.Wait(ctx, 300*time.Millisecond, nil)
	step("pause n0 and n1 (a minority)", 400*time.Millisecond,
		func() { must(nodes[0].Pause(op)); must(nodes[1].Pause(op)) },
		func() { must(nodes[0].Resume(op)); must(nodes[1].Resume(op)) })
	step("kill n2, restart it empty", 300*time.Millisecond,
		func() { must(nodes[2].Kill(op)) },
		func() { must(nodes[2].Start(op)) })
	step("pause n3 past the TTL", 1200*time.Millisecond,
		func() { must(nodes[3].Pause(op)) },
		func() { must(nodes[3].Resume(op)) })
	step("kill n4, restart it empty", 300*time.Millisecond,
		func() { must(nodes[4].Kill(op)) },
		func() { must(nodes[4].Start(op)) })
	<-ctx.Done()
}
