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

// TestSemaphoreChurnUnderFaults: six holders, each with its own Client,
// churn over one semaphore of two permits on five Redlock nodes without
// persistence (quorum 4 of 5) while the nemesis of
// TestMultiKeyChurnUnderFaults pauses a minority, kills a node and restarts
// it empty (the restart quarantine covers it), pauses one node past the TTL,
// and kills another. At no moment are more than two leases believed held
// (the believed-held intervals of the history, swept by start), and the
// semaphore was held.
func TestSemaphoreChurnUnderFaults(t *testing.T) {
	const permits, holders = 2, 6
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backend := chaos.NewProcessBackend()
	defer func() { require.NoError(t, backend.Close()) }()
	nodes, err := backend.StartNodes(ctx, 5, chaos.NodeSpec{Persistence: chaos.NoPersistence})
	require.NoError(t, err)

	h := chaos.NewHistory()
	var (
		mu  sync.Mutex
		ops []chaos.Op
	)
	run, stop := context.WithTimeout(ctx, 4*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for id := 0; id < holders; id++ {
		s := semaphore(t, nodes, permits, id == 0)
		wg.Go(func() {
			got := churn(run, h, id, s.TryAcquire) // Token is 0: no fencing
			mu.Lock()
			defer mu.Unlock()
			ops = append(ops, got...)
		})
	}
	multiKeyNemesis(run, t, h, nodes)
	wg.Wait()

	ivs := chaos.HeldIntervals(ops)
	t.Logf("%d leases held", len(ivs))
	assert.Positive(t, len(ivs), "the semaphore was held")
	assert.Empty(t, moreThan(ivs, permits), "more than %d holders at once", permits)
}

// semaphore returns a semaphore of permits on a Client of its own over
// nodes (1s TTL, 2s restart quarantine), with Redis clients closed when the
// test ends. The first one vouches for the brand-new nodes.
func semaphore(t *testing.T, nodes []chaos.Node, permits int, vouch bool) *redlock.Semaphore {
	t.Helper()
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	lc, err := redlock.New(clients, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithQuarantine(2*time.Second), redlock.WithKeyPrefix(fmt.Sprintf("%s:", t.Name())))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lc.Close() })
	if vouch {
		require.NoError(t, lc.Vouch(t.Context()))
	}
	s, err := lc.NewSemaphore("sem", permits)
	require.NoError(t, err)
	return s
}

// moreThan returns, for every interval at whose start more than k intervals
// (itself included) are open, the leases open then. Intervals that only
// touch do not overlap.
func moreThan(ivs []chaos.Interval, k int) [][]int {
	var out [][]int
	for i, iv := range ivs { // sorted by Start
		var open []int
		for _, o := range ivs[:i+1] {
			if o.Start <= iv.Start && o.End > iv.Start {
				open = append(open, o.Lease)
			}
		}
		if len(open) > k {
			out = append(out, slices.Clone(open))
		}
	}
	return out
}
