package single_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/single"
)

func TestFencingTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	key := redistest.Key(t)
	c := newClient(t, client, single.WithTTL(5*time.Second))
	m, err := c.NewMutex(key, single.WithFencing())
	require.NoError(t, err)
	var last fencing.Token
	for i := 0; i < 10; i++ {
		before := nodeMicros(ctx, t, client)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		after := nodeMicros(ctx, t, client)
		assert.Greater(t, l.Token(), last, "tokens increase with every acquisition")
		// The clock floor: max(counter + 1, the node's clock), and the counter
		// does not run ahead of the clock here.
		assert.GreaterOrEqual(t, l.Token(), before, "the token is not below the node's clock")
		assert.LessOrEqual(t, l.Token(), after)
		last = l.Token()
		require.NoError(t, l.Extend(ctx))
		assert.Equal(t, last, l.Token(), "Extend keeps the token")
		require.NoError(t, l.Release(ctx))
	}
	// A refused attempt does not consume a token.
	holder, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, single.ErrTaken)
	require.NoError(t, holder.Release(ctx))
	next, err := m.TryLock(ctx)
	require.NoError(t, err)
	assert.Greater(t, next.Token(), holder.Token())
	require.NoError(t, next.Release(ctx))

	got, err := client.HGet(ctx, core.FenceKey(key), "t").Result()
	require.NoError(t, err)
	assert.Equal(t, next.Token().String(), got, "release never touches the counter")
	ttl, err := client.PTTL(ctx, core.FenceKey(key)).Result()
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), ttl.Seconds(), 5, "the counter expires after the default retention")

	plainKey := redistest.Key(t)
	plain, err := c.NewMutex(plainKey)
	require.NoError(t, err)
	l, err := plain.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, fencing.Token(0), l.Token())
	require.NoError(t, l.Release(ctx))
	n, err := client.Exists(ctx, core.FenceKey(plainKey)).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "no fence key without fencing")
}

// nodeMicros reads the node's clock (TIME) in microseconds.
func nodeMicros(ctx context.Context, t *testing.T, c redis.UniversalClient) fencing.Token {
	t.Helper()
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	return fencing.Token(now.UnixMicro())
}
