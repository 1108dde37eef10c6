package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestFencingTokens: tokens on five nodes (locktest.FencingTokens).
func TestFencingTokens(t *testing.T) { locktest.FencingTokens(t, kind(5)) }

func aofNodes(t *testing.T, n int) []*redisnode.Node {
	return redistest.Nodes(t, n, func(o *redisnode.Options) { o.AppendFsyncAlways = true })
}

// Acquire many times while only nodes {0,1,2} answer (the others stopped),
// then only {0,3,4}, then only {1,2,3}: every token must be strictly larger
// than all earlier ones, although no single node saw every acquisition.
func TestFencingUnevenCounters(t *testing.T) {
	ctx := ctxT(t)
	nodes := aofNodes(t, 5) // stopped nodes keep their counters
	clients := redistest.Clients(t, nodes)
	// appendfsync always: a restart loses nothing, so the quarantine is off.
	c := newClient(t, clients, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithFencing(), redlock.WithQuarantine(0))
	key := redistest.Key(t)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	var tokens []fencing.Token
	for _, up := range [][]int{{0, 1, 2}, {0, 3, 4}, {1, 2, 3}} {
		isUp := map[int]bool{}
		for _, i := range up {
			isUp[i] = true
		}
		for i, n := range nodes {
			if isUp[i] && !n.Running() {
				require.NoError(t, n.Restart(ctx))
			}
			if !isUp[i] && n.Running() {
				require.NoError(t, n.Kill())
			}
		}
		for i := 0; i < 10; i++ {
			// Lock retries: the first request on a pooled connection to a
			// restarted node fails, as in production.
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := m.Lock(lctx)
			cancel()
			require.NoError(t, err, "nodes %v", up)
			tokens = append(tokens, l.Token())
			require.NoError(t, l.Release(ctx))
		}
	}
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "acquisition %d (tokens %v)", i, tokens)
	}
}

type grant struct {
	called, returned time.Time
	token            fencing.Token
}

// checkTokens asserts that no token repeats and that tokens respect the
// real-time order of acquisitions: if A returned before B was called, A's
// token is smaller.
func checkTokens(t *testing.T, grants []grant) {
	t.Helper()
	seen := map[fencing.Token]int{}
	for i, g := range grants {
		if j, dup := seen[g.token]; dup {
			t.Errorf("token %d issued twice (grants %d and %d)", g.token, j, i)
		}
		seen[g.token] = i
	}
	byReturn := append([]grant(nil), grants...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].returned.Before(byReturn[j].returned) })
	byCall := append([]grant(nil), grants...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].called.Before(byCall[j].called) })
	// Sweep: for each grant in call order, the highest token among grants
	// that returned before it was called must be below its own.
	var hi fencing.Token
	k := 0
	violations := 0
	for _, g := range byCall {
		for k < len(byReturn) && byReturn[k].returned.Before(g.called) {
			hi = max(hi, byReturn[k].token)
			k++
		}
		if g.token <= hi {
			violations++
		}
	}
	assert.Zero(t, violations, "grants whose token is not above every token returned before they began")
}

// Several clients acquire one key a few thousand times while a seeded
// schedule pauses, kills and restarts nodes (with appendfsync always, so no
// acknowledged counter write is lost). No token may repeat, and tokens must
// respect real-time order.
func TestFencingStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	nodes := aofNodes(t, 5)
	clients := redistest.Clients(t, nodes)
	key := redistest.Key(t)
	const workers, target = 4, 2000
	var (
		mu     sync.Mutex
		grants []grant
	)
	stopped, stop := context.WithCancel(ctx) // ends the workers' loops, not their Lock calls
	defer stop()
	granted := make(chan struct{}, target*2)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		// appendfsync always: a restart loses nothing, so the quarantine is off.
		c := newClient(t, clients, redlock.WithTTL(500*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond),
			redlock.WithFencing(), redlock.WithQuarantine(0))
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stopped.Err() == nil {
				actx, cancel := context.WithTimeout(ctx, time.Second)
				called := time.Now()
				l, err := m.Lock(actx)
				returned := time.Now()
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				grants = append(grants, grant{called, returned, l.Token()})
				mu.Unlock()
				select {
				case granted <- struct{}{}:
				default:
				}
				_ = l.Release(ctx)
			}
		}()
	}
	// The fault schedule: at most two nodes disturbed at once.
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var faults []string
	deadline := time.Now().Add(40 * time.Second) // on a loaded machine: fewer grants, still checked
	for {
		mu.Lock()
		n := len(grants)
		mu.Unlock()
		if n >= target || time.Now().After(deadline) {
			break
		}
		a, b := rng.IntN(5), rng.IntN(5)
		switch rng.IntN(3) {
		case 0:
			require.NoError(t, nodes[a].Pause())
			require.NoError(t, nodes[b].Pause())
			faults = append(faults, fmt.Sprintf("pause %d,%d", a, b))
			waitGrants(granted, 20, 200*time.Millisecond)
			require.NoError(t, nodes[a].Resume())
			require.NoError(t, nodes[b].Resume())
		case 1:
			require.NoError(t, nodes[a].Kill())
			faults = append(faults, fmt.Sprintf("kill %d", a))
			waitGrants(granted, 20, 200*time.Millisecond)
			require.NoError(t, nodes[a].Restart(ctx))
		default:
			waitGrants(granted, 50, 200*time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d grants under %d faults", len(grants), len(faults))
	require.GreaterOrEqual(t, len(grants), 500, "enough acquisitions to mean something")
	checkTokens(t, grants)
}

// waitGrants returns once n more grants were signalled or max passed: it
// sets how long a fault lasts.
func waitGrants(granted <-chan struct{}, n int, maxWait time.Duration) {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-granted:
		case <-t.C:
			return
		}
	}
}
