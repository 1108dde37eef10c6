package redlock_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestFenceMemory measures what fencing leaves on a node: N distinct keys
// locked once each and released, then the same after the fence retention.
// It runs only when REDFENCE_FENCE_MEMORY_KEYS is set (docs/fencing.md,
// Memory, gives the command and the figures).
func TestSingleFenceMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REDFENCE_FENCE_MEMORY_KEYS"))
	if n <= 0 {
		t.Skip("set REDFENCE_FENCE_MEMORY_KEYS to the number of keys to measure")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	const retention = 10 * time.Second
	c := newSingleClient(t, client, redlock.WithFencing(), redlock.WithFenceRetention(retention), redlock.WithNodeTimeout(time.Second))
	base := usedMemory(ctx, t, client)
	start := time.Now()
	for i := range n {
		m, err := c.NewMutex("order:" + strconv.Itoa(i))
		require.NoError(t, err)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	held := usedMemory(ctx, t, client)
	t.Logf("%d keys locked and released: %.1f bytes per key on the node (used_memory %d -> %d)",
		n, float64(held-base)/float64(n), base, held)
	require.Eventually(t, func() bool {
		k, err := client.DBSize(ctx).Result()
		return err == nil && k == 0
	}, time.Until(start.Add(retention))+2*time.Minute, 100*time.Millisecond, "every fence hash expires")
	after := usedMemory(ctx, t, client)
	t.Logf("after the %v retention: %.1f bytes per key (used_memory %d)", retention, float64(after-base)/float64(n), after)
}

func usedMemory(ctx context.Context, t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
