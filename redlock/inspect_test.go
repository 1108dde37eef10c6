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
	assert.Equal(t, redlock.FenceKeyOf("p:"+key), ins.FenceKey)
	for i, n := range ins.Nodes {
		require.NoError(t, n.Err, "node %d", i)
		assert.Equal(t, i, n.Index)
		assert.Equal(t, nodes[i].Addr(), n.Addr)
		assert.Equal(t, redlock.NodeState{Index: i, Addr: n.Addr, Quarantine: n.Quarantine}, n, "free, no counter")
		assert.False(t, n.Quarantine.Marked, "node %d: brand-new, no marker", i)
		assert.False(t, n.Quarantine.Vouched)
		assert.Equal(t, q, n.Quarantine.Left, "its quarantine starts on first use")
	}

	m, err := c.NewMutex(key)
	require.NoError(t, err)
	_, err = m.TryLock(t.Context())
	require.ErrorIs(t, err, redlock.ErrQuarantined, "brand-new nodes refuse")
	for i, n := range inspect().Nodes {
		assert.True(t, n.Quarantine.Marked, "node %d: the refused acquire wrote the marker", i)
		assert.Greater(t, n.Quarantine.Left, q-5*time.Second, "node %d", i)
		assert.LessOrEqual(t, n.Quarantine.Left, q)
	}

	require.NoError(t, c.Vouch(t.Context()))
	lease, err := m.TryLock(t.Context())
	require.NoError(t, err)
	var fenced []int
	for i, n := range inspect().Nodes {
		assert.True(t, n.Quarantine.Vouched, "node %d", i)
		assert.Zero(t, n.Quarantine.Left)
		assert.Equal(t, lease.Value(), n.Holder, "node %d holds the lease", i)
		assert.Positive(t, n.TTL)
		assert.LessOrEqual(t, n.TTL, ttl)
		// Phase 2 of fenced Redlock writes the token on a majority; the
		// third write may be cut short once the majority agreed.
		if n.Token == lease.Token() {
			fenced = append(fenced, i)
		}
	}
	require.GreaterOrEqual(t, len(fenced), 2, "a majority holds the token of the fenced acquire")
	require.NoError(t, lease.Release(t.Context()))

	// Keep a node that holds the token (any of the three may be the one whose
	// phase-2 write was cut short), restart the next and kill the last.
	keep := fenced[0]
	restart, dead := (keep+1)%3, (keep+2)%3
	require.NoError(t, nodes[restart].Restart(t.Context()))
	require.NoError(t, nodes[dead].Kill())
	ins = inspect()
	for _, i := range []int{keep, restart} {
		n := ins.Nodes[i]
		require.NoError(t, n.Err, "node %d", i)
		assert.Empty(t, n.Holder, "node %d: released", i)
		assert.Zero(t, n.TTL)
	}
	assert.Equal(t, lease.Token(), ins.Nodes[keep].Token, "the counter outlives the lease")
	assert.True(t, ins.Nodes[keep].Quarantine.Vouched)
	restarted := ins.Nodes[restart]
	assert.Zero(t, restarted.Token, "a restart without persistence loses the counter")
	assert.False(t, restarted.Quarantine.Vouched, "a restart ends the vouching")
	assert.False(t, restarted.Quarantine.Marked, "a restart without persistence loses the marker")
	assert.Less(t, restarted.Quarantine.Uptime, q)
	assert.Error(t, ins.Nodes[dead].Err, "the dead node is reported")
	assert.Equal(t, redlock.NodeState{Index: dead, Addr: nodes[dead].Addr(), Err: ins.Nodes[dead].Err}, ins.Nodes[dead], "and nothing else of it")
}

// TestInspectRefuses checks Inspect's refusals: bad arguments with the
// module's invalid-argument error, an ended ctx, a closed Client.
func TestInspectRefuses(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 1)
	c, err := redlock.New(redistest.Clients(t, nodes))
	require.NoError(t, err)
	for _, key := range []string{"", redlock.MarkerKey, redlock.FenceKeyOf("k")} {
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
