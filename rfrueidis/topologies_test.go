package rfrueidis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestClusterOverRueidis: the single lock over a rueidis Cluster client, on
// keys whose slots three primaries own: each key is held on the primary
// that owns its slot (read through go-redis), tokens increase, Inspect reads
// every key where it lives, and CheckNodes checks each primary.
func TestClusterOverRueidis(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cc := redistest.Cluster(t, 3)
	rc, err := rueidisOf(cc)
	require.NoError(t, err)
	c, err := NewSingle(rc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	owners := map[string]bool{}
	var last uint64
	for i := range 30 {
		key := fmt.Sprintf("%s-%d", redistest.Key(t), i)
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		got, err := cc.Get(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, l.Value(), got, "the key holds the lease on its slot's primary")
		owner, err := cc.MasterForKey(ctx, key)
		require.NoError(t, err)
		owners[owner.Options().Addr] = true
		assert.Greater(t, uint64(l.Token()), last, "tokens increase across slots (the clock floor)")
		last = uint64(l.Token())
		ins, err := c.Inspect(ctx, key)
		require.NoError(t, err)
		require.NoError(t, ins.Nodes[0].Err)
		assert.Equal(t, l.Value(), ins.Nodes[0].Holder)
		assert.Equal(t, l.Token(), ins.Nodes[0].Token)
		require.NoError(t, l.Extend(ctx))
		require.NoError(t, l.Release(ctx))
		n, err := cc.Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "Release deleted the key")
	}
	assert.Len(t, owners, 3, "the keys covered every primary")
	checks := c.CheckNodes(ctx)
	require.Len(t, checks, 1)
	assert.NoError(t, checks[0].Err, "every primary was checked")
	assert.Equal(t, "master", checks[0].Role)
}

// TestSentinelOverRueidis: the single lock over a rueidis Sentinel client,
// with replica acknowledgement: an acquire that both replicas acknowledge
// is granted, one that asks for a third is refused with the count WAIT gave.
func TestSentinelOverRueidis(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rig := redistest.Sentinel(t, 2)
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: rig.SentinelAddrs(), DisableCache: true, DisableRetry: true,
		Sentinel: rueidis.SentinelOption{MasterSet: redistest.SentinelMaster},
	})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	redistest.WaitOnline(t, rig.Primary, 2)

	c, err := NewSingle(rc, redlock.WithReplicaAcks(2, time.Second), redlock.WithNodeTimeout(2*time.Second), redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err, "both replicas acknowledged")
	assert.Positive(t, l.Token())
	got, err := redistest.Client(t, rig.Primary.Addr()).Get(ctx, m.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, l.Value(), got, "the key is on the primary Sentinel names")
	require.NoError(t, l.Release(ctx))

	three, err := NewSingle(rc, redlock.WithReplicaAcks(3, 100*time.Millisecond), redlock.WithNodeTimeout(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = three.Close() })
	m3, err := three.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	_, err = m3.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrReplicaAcks, "a third replica does not exist")
	assert.Regexp(t, `[0-2] of 3 replicas within`, err.Error(), "WAIT's count: the two replicas at most (fewer if one lagged past 100ms)")
}
