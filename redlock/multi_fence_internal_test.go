package redlock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// multi_fence.lua, phase 2 of fenced Redlock for a multi-key lock, applies
// fence.lua's rules to every key (the key holds our value, the strict
// acceptor, the clock floor) and records the token only when every key
// passes. Run on one node of three, with crafted fence hashes.
func TestMultiFenceScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, clients := testEngine(t, "redlock", 3, WithTTL(10*time.Second), WithFencing(), WithQuarantine(0))
	node := clients[0]
	base := redistest.Key(t)
	ks := []string{base + ":a", base + ":b"}
	floorOn, err := e.NewMultiMutex(ks)
	require.NoError(t, err)
	m, err := e.NewMultiMutex(ks, WithoutClockFloor())
	require.NoError(t, err)

	fence := func(m *Mutex, value string, tok int64) (int64, error) {
		cmd := redis.NewCmd(ctx, m.fenceArgs(value, strconv.FormatInt(tok, 10))...)
		_ = node.Process(ctx, cmd)
		retryScript(ctx, redisconn.GoRedis(node), cmd)
		return decodeFence(cmd)
	}
	counter := func(i int) (n int64, owner string) {
		h, err := node.HGetAll(ctx, keys.Fence(ks[i])).Result()
		require.NoError(t, err)
		n, _ = strconv.ParseInt(h["t"], 10, 64)
		return n, h["owner"]
	}
	for _, k := range ks {
		require.NoError(t, node.Set(ctx, k, "v", time.Minute).Err())
	}
	require.NoError(t, node.HSet(ctx, keys.Fence(ks[0]), "t", 5, "owner", "x").Err())
	require.NoError(t, node.HSet(ctx, keys.Fence(ks[1]), "t", 7, "owner", "x").Err())

	_, err = fence(m, "w", 9)
	require.ErrorIs(t, err, ErrNotHeld, "not the holder of the ks")
	_, err = fence(m, "v", 7)
	var fa fenceAheadError
	require.ErrorAs(t, err, &fa, "the second key's counter is at t, for another owner")
	assert.Equal(t, int64(7), fa.counter)
	_, err = fence(m, "v", 6)
	require.ErrorAs(t, err, &fa, "the second key's counter is above t")
	assert.Equal(t, int64(7), fa.counter)
	c, o := counter(0)
	assert.Equal(t, int64(5), c, "nothing recorded on the first key unless every key passes")
	assert.Equal(t, "x", o)

	require.NoError(t, node.HSet(ctx, keys.Fence(ks[1]), "owner", "v").Err())
	got, err := fence(m, "v", 7)
	require.NoError(t, err, "the second key's counter is at t for us: a repeated request")
	assert.Equal(t, int64(7), got)
	for i := range ks {
		c, o := counter(i)
		assert.Equal(t, int64(7), c, ks[i])
		assert.Equal(t, "v", o, ks[i])
	}

	require.NoError(t, node.Del(ctx, ks[1]).Err())
	_, err = fence(m, "v", 8)
	require.ErrorIs(t, err, ErrNotHeld, "the second key no longer holds our value")
	c, _ = counter(0)
	assert.Equal(t, int64(7), c, "nothing recorded when a key is not held")

	require.NoError(t, node.Set(ctx, ks[1], "v", time.Minute).Err())
	_, err = fence(floorOn, "v", 8)
	var fb fenceBelowClockError
	require.ErrorAs(t, err, &fb, "8 is far below the node's clock in microseconds")
	c, _ = counter(0)
	assert.Equal(t, int64(7), c, "nothing recorded below the clock floor")
}
