package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAwaitFree: a duel's A waits for a key left on a node to expire, and
// not at all when the key is free or only on a paused node; a key that never
// expires is given up on after two TTLs, with the fact recorded.
func TestAwaitFree(t *testing.T) {
	ctx := t.Context()
	nodes, err := processBackend(t).StartNodes(ctx, 3, NodeSpec{})
	require.NoError(t, err)
	r := netRun(t, nodes, 1)
	r.key, r.ttl = "redfence:chaos:await", 200*time.Millisecond
	set := func(i int, ttl time.Duration) {
		require.NoError(t, r.onNode(ctx, nodes[i], func(ctx context.Context, c *redis.Client) error {
			return c.Set(ctx, r.key, "left", ttl).Err()
		}))
	}
	holders := func() (out []int64) {
		for _, n := range nodes {
			require.NoError(t, r.onNode(ctx, n, func(ctx context.Context, c *redis.Client) error {
				k, err := c.Exists(ctx, r.key).Result()
				out = append(out, k)
				return err
			}))
		}
		return out
	}
	facts := func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]string(nil), r.facts...)
	}

	r.awaitFree(ctx)
	assert.Empty(t, facts(), "a free key: no wait, no fact")

	set(1, 150*time.Millisecond)
	r.awaitFree(ctx)
	assert.Equal(t, []int64{0, 0, 0}, holders(), "returns once the left key expired")
	assert.Empty(t, facts())

	set(0, 0)
	require.NoError(t, r.pause(ctx, nodes[0]))
	r.awaitFree(ctx)
	assert.Empty(t, facts(), "a paused node is not asked")
	require.NoError(t, r.resume(ctx, nodes[0]))

	r.awaitFree(ctx)
	assert.Equal(t, []string{"before A's acquire, the lock key was still on " + nodes[0].Name()}, facts(),
		"a key without a TTL is given up on")
}
