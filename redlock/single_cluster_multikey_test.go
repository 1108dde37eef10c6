package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// clusterMultiKey is TestClusterSingle's multi-key part: keys that share a
// hash tag are locked together on the primary that owns their slot, with a
// token each; keys in different slots are refused with a *ConfigError that
// names two of them; redlock's slotOf agrees with CLUSTER KEYSLOT.
func clusterMultiKey(t *testing.T, cc *redis.ClusterClient) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())
	base := redistest.Key(t)
	for i := range 200 {
		k := fmt.Sprintf("%s-%d", base, i)
		require.Equal(t, clusterSlotOf(t, cc, k), int64(redlock.SlotOf(k)), "redlock.SlotOf(%q) is CLUSTER KEYSLOT's", k)
	}

	tag := "{" + base + "}"
	keys := []string{tag + ":a", tag + ":b", tag + ":c"}
	m, err := c.NewMultiMutex(keys)
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	node := owner(t, cc, keys[0])
	for _, k := range keys {
		got, err := node.Get(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, l.Value(), got, "every key on the primary of their slot")
	}
	assert.Len(t, l.Tokens(), 3)
	_, err = singleMutex(t, c, keys[1]).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a plain lock on one of the keys is refused")
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))
	n, err := node.Exists(ctx, keys...).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	apart := []string{base + "-x", base + "-y"}
	for i := 0; redlock.SlotOf(apart[0]) == redlock.SlotOf(apart[1]); i++ {
		apart[1] = fmt.Sprintf("%s-y%d", base, i)
	}
	_, err = c.NewMultiMutex(apart)
	var ce *redlock.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "different slots")
	assert.Contains(t, err.Error(), fmt.Sprintf("%q", apart[0]))
	assert.Contains(t, err.Error(), fmt.Sprintf("%q", apart[1]))
}
