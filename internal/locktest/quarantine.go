package locktest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// DeadAddrs returns n distinct loopback addresses on which nothing listens:
// all n listen until the last is picked, so that no port comes twice.
func DeadAddrs(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	lns := make([]net.Listener, 0, n)
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	return out
}

// view returns clients for every position: the real node where up, a dead
// address otherwise. It models a client that can reach only some nodes.
func view(t *testing.T, nodes []*redisnode.Node, dead []string, up ...int) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(nodes))
	for i := range clients {
		clients[i] = redistest.Client(t, dead[i])
	}
	for _, i := range up {
		clients[i] = redistest.Client(t, nodes[i].Addr())
	}
	return clients
}

// RestartQuarantine has client A hold its majority (with five nodes
// {0,1,2}); the nodes it shares with B's majority ({2,3,4}; with one node,
// that node) restart empty; client B, which can reach only its majority, must not
// acquire while they are in quarantine, and does once the quarantine has
// ended (by then A's lease has expired). The control, without the
// quarantine, shows two holders at once.
func RestartQuarantine(t *testing.T, k Kind) {
	const ttl, quarantine = 2 * time.Second, 3 * time.Second
	run := func(t *testing.T, q time.Duration) (aValidUntil, bAcquiredAt time.Time, refusedWhileHeld bool) {
		ctx := ctxT(t)
		nodes := redistest.Nodes(t, k.Nodes) // no persistence: a restart comes back empty
		first, last, shared := majorities(k.Nodes)
		require.NoError(t, k.client(t, redistest.Clients(t, nodes)).Vouch(ctx), "brand-new nodes: the operator vouches")
		dead := DeadAddrs(t, k.Nodes)
		o := []redlock.Option{redlock.WithTTL(ttl), redlock.WithQuarantine(q)}
		a, err := k.New(view(t, nodes, dead, first...), o...)
		require.NoError(t, err)
		defer a.Close()
		b, err := k.New(view(t, nodes, dead, last...), o...)
		require.NoError(t, err)
		defer b.Close()
		key := redistest.Key(t)
		ma, mb := mutex(t, a, key), mutex(t, b, key)

		la, err := ma.TryLock(ctx)
		require.NoError(t, err)
		for _, i := range shared {
			require.NoError(t, nodes[i].Kill())
			require.NoError(t, nodes[i].Restart(ctx))
		}

		lb, err := mb.TryLock(ctx)
		if err == nil {
			_ = lb.Release(ctx)
			return la.ValidUntil(), time.Now(), false
		}
		if time.Now().Before(la.ValidUntil()) {
			refusedWhileHeld = true
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			if q > 0 {
				require.ErrorIs(t, err, redlock.ErrQuarantined, "the refusal names the quarantine")
				for _, i := range shared {
					assert.Contains(t, err.Error(), fmt.Sprintf("node %d (%s)", i, nodes[i].Addr()))
				}
				assert.Regexp(t, `restart quarantine \([0-9.]+[mµn]?s left\)`, err.Error(), "time left is reported")
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 3*quarantine)
		defer cancel()
		lb, err = mb.Lock(lctx)
		require.NoError(t, err, "B acquires once the restarted nodes may vote again")
		bAcquiredAt = time.Now()
		_ = lb.Release(ctx)
		return la.ValidUntil(), bAcquiredAt, refusedWhileHeld
	}

	t.Run("quarantine", func(t *testing.T) {
		aValid, bAt, refused := run(t, quarantine)
		assert.True(t, refused, "B was refused while A's lease was valid")
		assert.True(t, bAt.After(aValid), "B acquired only after A's validity ended")
	})
	t.Run("control without quarantine", func(t *testing.T) {
		aValid, bAt, refused := run(t, 0)
		assert.False(t, refused)
		assert.True(t, bAt.Before(aValid), "two holders at once: B acquired while A's lease was still valid")
	})
}

// QuarantineValidation checks the quarantine's option and the TTLs it
// allows: the kind's default (redlock: 1m0s; single: off, any TTL), a
// negative quarantine, and a Client's and a Mutex's TTL above it.
func QuarantineValidation(t *testing.T, k Kind) {
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	if k.DefaultQuarantine > 0 {
		_, err := k.New(clients, redlock.WithTTL(2*k.DefaultQuarantine))
		require.ErrorContains(t, err, "exceeds the restart quarantine of "+k.DefaultQuarantine.String())
	} else {
		c, err := k.New(clients, redlock.WithTTL(2*time.Minute))
		require.NoError(t, err, "the quarantine is off by default: a long TTL is fine")
		require.NoError(t, c.Close())
	}
	_, err := k.New(clients, redlock.WithQuarantine(-time.Second))
	require.ErrorContains(t, err, "quarantine")
	c, err := k.New(clients, redlock.WithTTL(2*time.Minute), redlock.WithQuarantine(3*time.Minute))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.NewMutex("k", redlock.WithTTL(4*time.Minute))
	require.ErrorContains(t, err, "exceeds the restart quarantine")
}

// QuarantineNewAndFlushedNodes checks that brand-new nodes are quarantined
// until vouched for; a flush (marker gone) quarantines a node again although it did
// not restart.
func QuarantineNewAndFlushedNodes(t *testing.T, k Kind) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, k.Nodes)
	clients := redistest.Clients(t, nodes)
	c := k.unvouched(t, clients, redlock.WithTTL(time.Second), redlock.WithQuarantine(time.Minute))
	m := mutex(t, c, redistest.Key(t))
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "new nodes wait one quarantine period")
	require.NoError(t, c.Vouch(ctx))
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	// Flush just enough nodes that the others are no majority.
	flushed := k.Nodes - majority(k.Nodes) + 1
	for _, cl := range clients[:flushed] {
		require.NoError(t, cl.FlushAll(ctx).Err())
	}
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "flushed nodes sit out")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, k.Nodes-flushed, qe.Got, "only the untouched nodes voted")
}

// QuarantineRestartWithPersistedMarker restarts nodes that persist their
// data, so that the marker survives, once the acquire script skips INFO (the
// node has been up, by LASTSAVE, longer than the quarantine): the restart
// must still be caught, by the uptime rule.
func QuarantineRestartWithPersistedMarker(t *testing.T, k Kind) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, k.Nodes, func(o *redisnode.Options) { o.AppendFsyncAlways = true })
	// A node timeout of 100ms, not the default TTL/10 (30ms): on a loaded
	// machine a 30ms timeout fails an attempt for a reason this test is not
	// about.
	c := k.unvouched(t, redistest.Clients(t, nodes), redlock.WithTTL(300*time.Millisecond),
		redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithQuarantine(time.Second))
	m := mutex(t, c, redistest.Key(t))
	acquireEventually := func() {
		require.Eventually(t, func() bool {
			l, err := m.TryLock(ctx)
			if err != nil {
				require.ErrorIs(t, err, redlock.ErrQuarantined)
				return false
			}
			require.NoError(t, l.Release(ctx))
			return true
		}, 10*time.Second, 20*time.Millisecond)
	}
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "a new node starts quarantined")
	acquireEventually()
	// Let the nodes' uptime pass the quarantine by more than LASTSAVE's
	// one-second rounding, so the fast path is the one taken.
	for _, node := range nodes {
		require.Eventually(t, func() bool {
			info, err := redistest.Client(t, node.Addr()).Info(ctx, "server").Result()
			require.NoError(t, err)
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
					up, err := strconv.Atoi(v)
					return err == nil && up >= 3
				}
			}
			return false
		}, 10*time.Second, 50*time.Millisecond)
	}
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	for _, node := range nodes {
		require.NoError(t, node.Kill())
		require.NoError(t, node.Restart(ctx))
	}
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "restarted with its marker intact, the node still sits out")
	acquireEventually()
}
