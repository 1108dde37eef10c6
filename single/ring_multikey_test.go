package single_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/single"
)

// TestMultiKeyRing: over a Ring of two shards, a multi-key lock needs one
// hash tag on every key (the Ring places keys by it): keys with different
// tags are refused with a *ConfigError naming two of them; keys with one tag
// are locked together on one shard.
func TestMultiKeyRing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	nodes := redistest.Nodes(t, 2)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": nodes[0].Addr(), "b": nodes[1].Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	c := newClient(t, ring, single.WithTTL(10*time.Second))
	base := redistest.Key(t)

	_, err := c.NewMultiMutex([]string{base + ":x", base + ":y"})
	var ce *single.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "is a Ring")
	assert.Contains(t, err.Error(), base+":y")

	tag := "{" + base + "}"
	m, err := c.NewMultiMutex([]string{tag + ":x", tag + ":y"})
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	shard, err := ring.GetShardClientForKey(tag + ":x")
	require.NoError(t, err)
	for _, k := range l.Keys() {
		got, err := shard.Get(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, l.Value(), got, "every key on the shard of the tag")
	}
	require.NoError(t, l.Release(ctx))
}
