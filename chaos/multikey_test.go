package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/redlock"
)

// multiKeySets are the key sets of TestMultiKeyChurnUnderFaults' holders:
// multi-key locks over overlapping sets, and a plain lock on one key.
var multiKeySets = [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"a", "b", "c"}, {"b"}, {"c", "b"}}

// TestMultiKeyChurnUnderFaults: holders of multi-key locks over overlapping
// key sets (and a plain lock on one key), each with its own Client, churn
// on five Redlock nodes without persistence while the nemesis pauses a
// minority, kills a node and restarts it empty (the restart quarantine
// covers it), pauses one node past the TTL, and kills another. For every
// key, no two leases that include it are believed held at once
// (chaos.Overlaps on the key's history), every key was held, and the fencing
// tokens of the key's acquisitions never repeat and increase in real time
// (an acquisition that returned before another was called has the lower
// token; over several nodes every key of a lease carries its one token).
func TestMultiKeyChurnUnderFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backend := chaos.NewProcessBackend()
	defer func() { require.NoError(t, backend.Close()) }()
	nodes, err := backend.StartNodes(ctx, 5, chaos.NodeSpec{Persistence: chaos.NoPersistence})
	require.NoError(t, err)

	h := chaos.NewHistory()
	var (
		mu  sync.Mutex
		ops [][]chaos.Op // per holder
	)
	run, stop := context.WithTimeout(ctx, 4*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for id, set := range multiKeySets {
		m := multiKeyMutex(t, nodes, set, id == 0)
		wg.Go(func() {
			got := churn(run, h, id, m.TryLock)
			mu.Lock()
			defer mu.Unlock()
			ops = append(ops, got)
		})
	}
	multiKeyNemesis(run, t, h, nodes)
	wg.Wait()

	for _, key := range []string{"a", "b", "c"} {
		var keyOps []chaos.Op
		for _, hops := range ops {
			if len(hops) > 0 && slices.Contains(multiKeySets[hops[0].Client], key) {
				keyOps = append(keyOps, hops...)
			}
		}
		held := 0
		for _, op := range keyOps {
			if op.Held() {
				held++
			}
		}
		t.Logf("key %s: %d leases held", key, held)
		assert.Positive(t, held, "key %s was held", key)
		assert.Empty(t, chaos.Overlaps(keyOps), "two holders of key %s at once", key)
		assert.Empty(t, tokenViolations(keyOps), "tokens of key %s", key)
	}
}

// multiKeyMutex returns a multi-key mutex over set on a Client of its own
// over nodes (1s TTL, 2s restart quarantine), with Redis clients closed when
// the test ends. The first one vouches for the brand-new nodes.
func multiKeyMutex(t *testing.T, nodes []chaos.Node, set []string, vouch bool) *redlock.Mutex {
	t.Helper()
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	lc, err := redlock.New(clients, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithQuarantine(2*time.Second), redlock.WithKeyPrefix(fmt.Sprintf("%s:", t.Name())), redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = lc.Close() })
	if vouch {
		require.NoError(t, lc.Vouch(t.Context()))
	}
	m, err := lc.NewMultiMutex(set)
	require.NoError(t, err)
	return m
}

// churn acquires with try (TryLock, TryAcquire), holds the lease 10ms (less if
// its validity ends or it is lost) and releases it, again and again until ctx
// ends, recording every acquire and release in h as holder id.
func churn(ctx context.Context, h *chaos.History, id int, try func(context.Context) (*redlock.Lease, error)) []chaos.Op {
	var ops []chaos.Op
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		p := h.Invoke(id, chaos.Acquire)
		l, err := try(actx)
		cancel()
		if err != nil {
			ops = append(ops, p.Complete(chaos.Fail, chaos.WithErr(err)))
			pause(ctx, 5*time.Millisecond, nil)
			continue
		}
		acq := p.Complete(chaos.OK, chaos.WithValidUntil(l.ValidUntil()), chaos.WithToken(l.Token()))
		ops = append(ops, acq)
		pause(ctx, min(10*time.Millisecond, time.Until(l.ValidUntil())), l.Done())
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

// tokenViolations lists the granted acquisitions in ops whose token is not
// above that of every granted acquisition that returned before they were
// called, or repeats another's.
func tokenViolations(ops []chaos.Op) []string {
	var granted []chaos.Op
	for _, op := range ops {
		if op.Kind == chaos.Acquire && op.Status == chaos.OK {
			granted = append(granted, op)
		}
	}
	var out []string
	for i, y := range granted {
		for j, x := range granted {
			switch {
			case i != j && x.Token == y.Token:
				out = append(out, fmt.Sprintf("acquisitions %d and %d share token %d", x.ID, y.ID, x.Token))
			case x.Return < y.Call && x.Token >= y.Token:
				out = append(out, fmt.Sprintf("acquisition %d (token %d) returned before %d (token %d) was called", x.ID, x.Token, y.ID, y.Token))
			}
		}
	}
	return out
}

// pause waits d, or until ctx ends or done closes.
func pause(ctx context.Context, d time.Duration, done <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-done:
	}
}

// multiKeyNemesis plays the faults of TestMultiKeyChurnUnderFaults, each
// recorded in h, until ctx ends, and leaves every node running.
func multiKeyNemesis(ctx context.Context, t *testing.T, h *chaos.History, nodes []chaos.Node) {
	op := context.WithoutCancel(ctx)
	step := func(note string, d time.Duration, fault, heal func()) {
		end := h.Fault(note)
		fault()
		pause(ctx, d, nil)
		heal()
		end()
		pause(ctx, 200*time.Millisecond, nil)
	}
	must := func(err error) { assert.NoError(t, err) }
	pause(ctx, 300*time.Millisecond, nil)
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
