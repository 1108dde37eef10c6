package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestMultiKeyRing: over a Ring of two shards, a multi-key lock needs one
// hash tag on every key (the Ring places keys by it): keys with different
// tags are refused with a *ConfigError naming two of them; keys with one tag
// are locked together on one shard.
func TestSingleMultiKeyRing(t *testing.T) {
	t.Parallel()
	ctx, ring, c, base := ringFixture(t)

	_, err := c.NewMultiMutex([]string{base + ":x", base + ":y"})
	var ce *redlock.ConfigError
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
	for _, k := range m.Keys() {
		got, err := shard.Get(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, l.Value(), got, "every key on the shard of the tag")
	}
	require.NoError(t, l.Release(ctx))
}

// TestRWMutexRing: over a Ring of two shards, a read-write lock whose key
// has a '}' but no usable hash tag is refused (its readers' set would hash
// by another tag, so the Ring could place it on the other shard), naming
// the read-write lock; a plain key's readers' set and intent marker go to
// the lock key's shard, where readers and a writer take turns.
func TestSingleRWMutexRing(t *testing.T) {
	t.Parallel()
	ctx, ring, c, base := ringFixture(t)

	_, err := locktest.NewRW(c, base+"}")
	var ce *redlock.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "is a Ring")
	assert.Contains(t, err.Error(), "read-write lock")

	rw, err := locktest.NewRW(c, base)
	require.NoError(t, err)
	shard, err := ring.GetShardClientForKey(base)
	require.NoError(t, err)
	for _, k := range []string{redlock.ReadersKeyOf(base), redlock.IntentKeyOf(base)} {
		s, err := ring.GetShardClientForKey(k)
		require.NoError(t, err)
		assert.Equal(t, shard.Options().Addr, s.Options().Addr, "%q on the lock key's shard", k)
	}
	r, err := rw.TryRLock(ctx)
	require.NoError(t, err)
	n, err := shard.ZCard(ctx, redlock.ReadersKeyOf(base)).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the reader is recorded on the lock key's shard")
	_, err = rw.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrTaken)
	require.NoError(t, r.Release(ctx))
	w, err := rw.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
}

// ringFixture is a lock client over a Ring of two shards of its own, with a
// context bounding the test and the test's key.
func ringFixture(t *testing.T) (context.Context, *redis.Ring, *redlock.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	nodes := redistest.Nodes(t, 2)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": nodes[0].Addr(), "b": nodes[1].Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	return ctx, ring, newSingleClient(t, ring, redlock.WithTTL(10*time.Second)), redistest.Key(t)
}
