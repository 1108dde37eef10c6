package redlock_test

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

// deadAddrs returns n loopback addresses on which nothing listens.
func deadAddrs(t *testing.T, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		out = append(out, ln.Addr().String())
		require.NoError(t, ln.Close())
	}
	return out
}

// view returns clients for the five positions: the real node where up[i],
// a dead address otherwise. It models a client that can reach only some nodes.
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

// Client A holds nodes {0,1,2}; node 2 restarts empty; client B, which can
// reach only {2,3,4}, must not acquire while node 2 is in quarantine, and
// does once the quarantine has ended (by then A's lease has expired). The
// control, without the quarantine, shows two holders at once.
func TestRestartQuarantine(t *testing.T) {
	const ttl, quarantine = 2 * time.Second, 3 * time.Second
	run := func(t *testing.T, q time.Duration) (aValidUntil, bAcquiredAt time.Time, refusedWhileHeld bool) {
		ctx := ctxT(t)
		nodes := redistest.Nodes(t, 5) // no persistence: a restart comes back empty
		require.NoError(t, newClient(t, redistest.Clients(t, nodes)).Vouch(ctx), "brand-new nodes: the operator vouches")
		dead := deadAddrs(t, 5)
		opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithQuarantine(q)}
		a, err := redlock.New(view(t, nodes, dead, 0, 1, 2), opts...)
		require.NoError(t, err)
		defer a.Close()
		b, err := redlock.New(view(t, nodes, dead, 2, 3, 4), opts...)
		require.NoError(t, err)
		defer b.Close()
		key := redistest.Key(t)
		ma, err := a.NewMutex(key)
		require.NoError(t, err)
		mb, err := b.NewMutex(key)
		require.NoError(t, err)

		la, err := ma.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, nodes[2].Kill())
		require.NoError(t, nodes[2].Restart(ctx))

		lb, err := mb.TryLock(ctx)
		if err == nil {
			_ = lb.Release(ctx)
			return la.ValidUntil(), time.Now(), false
		}
		if time.Now().Before(la.ValidUntil()) {
			refusedWhileHeld = true
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			if q > 0 {
				var qe redlock.QuarantineError
				require.ErrorAs(t, err, &qe, "the refusal names the quarantine")
				assert.ErrorIs(t, err, redlock.ErrQuarantined)
				assert.Contains(t, err.Error(), fmt.Sprintf("node 2 (%s)", nodes[2].Addr()))
				assert.Greater(t, qe.Left, ttl/2, "time left is reported")
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 3*quarantine)
		defer cancel()
		lb, err = mb.Lock(lctx)
		require.NoError(t, err, "B acquires once node 2 may vote again")
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

func TestQuarantineValidation(t *testing.T) {
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	_, err := redlock.New(clients, redlock.WithTTL(2*time.Minute))
	require.ErrorContains(t, err, "exceeds the restart quarantine of 1m0s")
	_, err = redlock.New(clients, redlock.WithQuarantine(-time.Second))
	require.ErrorContains(t, err, "quarantine")
	c, err := redlock.New(clients, redlock.WithTTL(2*time.Minute), redlock.WithQuarantine(3*time.Minute))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.NewMutex("k", redlock.WithTTL(4*time.Minute))
	require.ErrorContains(t, err, "exceeds the restart quarantine")
}

// Brand-new nodes are quarantined until vouched for; a flush (marker gone)
// quarantines a node again although it did not restart.
func TestQuarantineNewAndFlushedNodes(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients, redlock.WithTTL(time.Second), redlock.WithQuarantine(time.Minute))
	require.NoError(t, err)
	defer c.Close()
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "new nodes wait one quarantine period")
	require.NoError(t, c.Vouch(ctx))
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	require.NoError(t, clients[0].FlushAll(ctx).Err())
	require.NoError(t, clients[1].FlushAll(ctx).Err())
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "flushed nodes sit out")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, 1, qe.Got, "only the untouched node voted")
}

// The marker survives a restart when the node persists its data, and the
// acquire script skips INFO once the node has been up (by LASTSAVE) longer than
// the quarantine: a restart must still be caught, by the uptime rule.
func TestQuarantineRestartWithPersistedMarker(t *testing.T) {
	ctx := ctxT(t)
	node := redistest.Nodes(t, 1, func(o *redisnode.Options) { o.AppendFsyncAlways = true })[0]
	c, err := redlock.New([]redis.UniversalClient{redistest.Client(t, node.Addr())},
		redlock.WithTTL(300*time.Millisecond), redlock.WithQuarantine(time.Second))
	require.NoError(t, err)
	defer c.Close()
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
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
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "a new node starts quarantined")
	acquireEventually()
	// Let the node's uptime pass the quarantine by more than LASTSAVE's
	// one-second rounding, so the fast path is the one taken.
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
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	require.NoError(t, node.Kill())
	require.NoError(t, node.Restart(ctx))
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "restarted with its marker intact, the node still sits out")
	acquireEventually()
}
