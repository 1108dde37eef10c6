package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestInspect follows one key on three nodes through Inspect: free on
// brand-new nodes, the quarantine a refused acquire starts, Vouch, a fenced
// holder with its token, the release, a restarted node and a dead one.
func TestInspect(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients, redlock.WithFencing(), redlock.WithKeyPrefix("p:"), redlock.WithTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	key := redistest.Key(t)
	inspect := func() *redlock.Inspection {
		t.Helper()
		ins, err := c.Inspect(t.Context(), key)
		require.NoError(t, err)
		require.Len(t, ins.Nodes, 3)
		return ins
	}
	q := redlock.DefaultQuarantine

	ins := inspect()
	assert.Equal(t, "p:"+key, ins.Key, "the Client's prefix applies")
	assert.Equal(t, redlock.FenceKey("p:"+key), ins.FenceKey)
	for i, n := range ins.Nodes {
		require.NoError(t, n.Err, "node %d", i)
		assert.Equal(t, i, n.Index)
		assert.Equal(t, nodes[i].Addr(), n.Addr)
		assert.Equal(t, redlock.NodeState{Index: i, Addr: n.Addr, Quarantine: n.Quarantine}, n, "free, no counter")
		assert.False(t, n.Quarantine.Marked, "node %d: brand-new, no marker", i)
		assert.False(t, n.Quarantine.Vouched)
		assert.Equal(t, q, n.Quarantine.Left(q), "its quarantine starts on first use")
		assert.Zero(t, n.Quarantine.Left(0), "quarantine off")
	}

	m, err := c.NewMutex(key)
	require.NoError(t, err)
	_, err = m.TryLock(t.Context())
	require.ErrorIs(t, err, redlock.ErrQuarantined, "brand-new nodes refuse")
	for i, n := range inspect().Nodes {
		assert.True(t, n.Quarantine.Marked, "node %d: the refused acquire wrote the marker", i)
		assert.Greater(t, n.Quarantine.Left(q), q-5*time.Second, "node %d", i)
		assert.LessOrEqual(t, n.Quarantine.Left(q), q)
	}

	require.NoError(t, c.Vouch(t.Context()))
	lease, err := m.TryLock(t.Context())
	require.NoError(t, err)
	fenced := 0
	for i, n := range inspect().Nodes {
		assert.True(t, n.Quarantine.Vouched, "node %d", i)
		assert.Zero(t, n.Quarantine.Left(q))
		assert.Equal(t, lease.Value(), n.Holder, "node %d holds the lease", i)
		assert.Positive(t, n.TTL)
		assert.LessOrEqual(t, n.TTL, ttl)
		// Phase 2 of fenced Redlock writes the token on a majority; the
		// third write may be cut short once the majority agreed.
		if n.Token == lease.Token() {
			fenced++
		}
	}
	assert.GreaterOrEqual(t, fenced, 2, "a majority holds the token of the fenced acquire")
	require.NoError(t, lease.Release(t.Context()))

	require.NoError(t, nodes[1].Restart(t.Context()))
	require.NoError(t, nodes[2].Kill())
	ins = inspect()
	for _, n := range ins.Nodes[:2] {
		require.NoError(t, n.Err, "node %d", n.Index)
		assert.Empty(t, n.Holder, "node %d: released", n.Index)
		assert.Zero(t, n.TTL)
	}
	assert.Equal(t, lease.Token(), ins.Nodes[0].Token, "the counter outlives the lease")
	assert.True(t, ins.Nodes[0].Quarantine.Vouched)
	restarted := ins.Nodes[1].Quarantine
	assert.False(t, restarted.Vouched, "a restart ends the vouching")
	assert.False(t, restarted.Marked, "a restart without persistence loses the marker")
	assert.Less(t, restarted.Uptime, q)
	assert.Error(t, ins.Nodes[2].Err, "the dead node is reported")
	assert.Equal(t, redlock.NodeState{Index: 2, Addr: nodes[2].Addr(), Err: ins.Nodes[2].Err}, ins.Nodes[2], "and nothing else of it")
}

// TestInspectRefuses checks Inspect's refusals: bad arguments with the
// module's invalid-argument error, an ended ctx, a closed Client.
func TestInspectRefuses(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 1)
	c, err := redlock.New(redistest.Clients(t, nodes))
	require.NoError(t, err)
	for _, key := range []string{"", redlock.MarkerKey, redlock.FenceKey("k")} {
		_, err := c.Inspect(t.Context(), key)
		assert.ErrorIs(t, err, redlock.ErrInvalid, "key %q", key)
	}
	_, err = c.Inspect(nil, "k") //nolint:staticcheck // a nil ctx is what is tested
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.Inspect(ctx, "k")
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, c.Close())
	_, err = c.Inspect(t.Context(), "k")
	assert.ErrorIs(t, err, redlock.ErrClosed)
}
