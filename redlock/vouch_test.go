package redlock_test

import (
	"context"
	"errors"
	"slices"
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

// vouchedFor returns the run id node c's marker vouches for, "" for none.
func vouchedFor(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	v, err := c.HGet(context.Background(), redlock.MarkerKey, "vouched").Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// runID returns node c's run id.
func runID(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	t.Fatal("no run_id in INFO server")
	return ""
}

// requireRefused checks that Vouch's err lists every one of n nodes, with
// ErrNotNew exactly for the nodes in inUse, and that it vouched for none.
func requireRefused(t *testing.T, err error, clients []redis.UniversalClient, inUse ...int) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotNew)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "vouch", qe.Op)
	assert.Zero(t, qe.Got)
	require.Len(t, qe.Nodes, len(clients), "every node is listed: none was vouched for")
	for i, ne := range qe.Nodes {
		assert.Equal(t, i, ne.Index)
		assert.Equal(t, slices.Contains(inUse, i), errors.Is(ne.Err, redlock.ErrNotNew), "node %d: %v", i, ne.Err)
	}
}

// Three of five nodes are flushed while client A holds a lock. B is refused
// (quarantined nodes, and nodes that report the key held). Vouching for the
// nodes now would let B take the lock A still holds: Vouch must refuse, on
// the evidence of the nodes that kept A's key, and vouch for none of them.
func TestVouchRefusesNodesInUse(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 5)
	clients := redistest.Clients(t, nodes)
	// A node timeout that a loaded machine does not reach (the default for
	// this TTL is 100ms): A's requests to the nodes past its majority land
	// rather than time out, and the test waits for them before the flush.
	a, err := redlock.New(clients, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(time.Second))
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.Vouch(ctx), "brand-new nodes")
	for i, c := range clients {
		require.Equal(t, runID(t, c), vouchedFor(t, c), "node %d is vouched for", i)
	}
	key := redistest.Key(t)
	am, err := a.NewMutex(key)
	require.NoError(t, err)
	held, err := am.TryLock(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Release(ctx) }()
	// TryLock returns at a majority: let the stragglers land before the
	// flush, so that none lands on a flushed node after it (that node would
	// then show A's key) and nodes 0-1 hold A's key.
	landedEverywhere(t, clients, key, held.Value())
	require.NoError(t, a.Vouch(ctx), "every node vouched for in its run: nothing changes, no refusal")

	for _, c := range clients[2:] {
		require.NoError(t, c.FlushAll(ctx).Err())
	}
	b, err := redlock.New(clients, redlock.WithTTL(30*time.Second))
	require.NoError(t, err)
	defer b.Close()
	bm, err := b.NewMutex(key)
	require.NoError(t, err)
	_, err = bm.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "the flushed nodes start their quarantine")
	require.ErrorIs(t, err, redlock.ErrTaken, "the others report the key held")

	err = b.Vouch(ctx)
	requireRefused(t, err, clients, 0, 1)
	assert.ErrorContains(t, err, "holds 1 key(s) besides its marker")
	for i, c := range clients[2:] {
		assert.Empty(t, vouchedFor(t, c), "flushed node %d must not be vouched for", i+2)
	}
	_, err = bm.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "B still cannot take the lock A holds")
	for i, c := range clients[:2] {
		v, err := c.Get(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, held.Value(), v, "node %d still holds A's key", i)
	}
}

// A fence hash outlives its lock by an hour or more: after a fenced lock was
// released, it is what shows that the nodes were in use.
func TestVouchRefusesFenceHashes(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients, redlock.WithFencing())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Vouch(ctx))
	key := redistest.Key(t)
	lockOnce(ctx, t, mutex(t, c, key))
	require.NoError(t, clients[0].FlushAll(ctx).Err())
	for i, cl := range clients[1:] {
		n, err := cl.Exists(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "node %d: the lock key is gone", i+1)
	}

	// One of nodes 1 and 2 keeps its fence hash, the other loses it too (a
	// straggler cut off by the majority may never have written it): one
	// node that shows use is enough.
	keep := -1
	for i := 1; i <= 2; i++ {
		n, err := clients[i].Exists(ctx, redlock.FenceKeyOf(key)).Result()
		require.NoError(t, err)
		if n == 1 && keep < 0 {
			keep = i
		} else {
			require.NoError(t, clients[i].Del(ctx, redlock.FenceKeyOf(key)).Err())
		}
	}
	require.Positive(t, keep, "a majority acknowledged the token: node 1 or 2 has the fence hash")
	err = c.Vouch(ctx)
	require.ErrorIs(t, err, redlock.ErrNotNew)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, qe.Nodes, 3, "every node is listed: none was vouched for")
	assert.ErrorIs(t, qe.Nodes[keep].Err, redlock.ErrNotNew, "the node with the fence hash")
	assert.ErrorContains(t, qe.Nodes[keep].Err, "holds 1 key(s) besides its marker")
	assert.False(t, errors.Is(qe.Nodes[0].Err, redlock.ErrNotNew), "the flushed node looks new")
	assert.Empty(t, vouchedFor(t, clients[0]))
}

// A node whose marker vouches for an earlier run restarted since: it is not
// new, even with no key left.
func TestVouchRefusesRestartedNode(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3, func(o *redisnode.Options) { o.AppendFsyncAlways = true })
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Vouch(ctx))
	old := vouchedFor(t, clients[1])
	require.NoError(t, nodes[1].Kill())
	require.NoError(t, nodes[1].Restart(ctx))
	require.Equal(t, old, vouchedFor(t, clients[1]), "the marker survived the restart")

	err = c.Vouch(ctx)
	requireRefused(t, err, clients, 1)
	assert.ErrorContains(t, err, "vouched for in an earlier run")
	assert.Equal(t, old, vouchedFor(t, clients[1]), "not vouched for its new run")
}

// A node that cannot be asked may be the one that holds a lock: Vouch
// vouches for none.
func TestVouchNeedsEveryNode(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, nodes[2].Kill())

	err = c.Vouch(ctx)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, qe.Nodes, 3)
	assert.False(t, errors.Is(err, redlock.ErrNotNew))
	assert.ErrorContains(t, qe.Nodes[0].Err, "no node is vouched for unless every node answers")
	for i, cl := range clients[:2] {
		assert.Empty(t, vouchedFor(t, cl), "node %d", i)
	}
}
