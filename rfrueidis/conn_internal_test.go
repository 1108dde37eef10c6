package rfrueidis

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
	"github.com/redfence/redfence/redlock"
)

// TestConnDecodesAsGoRedis sends the same commands to one server through
// go-redis (its generic command) and through conn, and checks that conn
// leaves the same reply, or an error of the same kind and text, in each:
// the engine decodes replies without knowing which client carried them.
func TestConnDecodesAsGoRedis(t *testing.T) {
	ctx := t.Context()
	node := redistest.Nodes(t, 1)[0]
	gr := redistest.Client(t, node.Addr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{node.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c := newConn(rc)
	key := redistest.Key(t)
	require.NoError(t, gr.Set(ctx, key, "v", 0).Err())
	require.NoError(t, gr.HSet(ctx, key+":h", "a", "1").Err())

	// own stands for a key of each client's own (the commands that write
	// it run once per client): with replaces it.
	const own = "\x00own"
	with := func(args []any, k string) []any {
		out := make([]any, len(args))
		for i, a := range args {
			if s, ok := a.(string); ok && strings.HasPrefix(s, own) {
				a = k + strings.TrimPrefix(s, own)
			}
			out[i] = a
		}
		return out
	}
	for _, args := range [][]any{
		{"get", key},
		{"get", key + ":missing"},
		{"hmget", key + ":h", "a", "b"},
		{"hget", key + ":h", "a"},
		{"pttl", key},
		{"eval", "return {1, 'two', {3}, false}", 0},
		{"eval", "return redis.error_reply('NOPE no such thing')", 0},
		{"eval", "return KEYS[1] .. ARGV[1]", 1, key, 42},
		{"evalsha", "0000000000000000000000000000000000000000", 0},
		{"config", "get", "appendonly"},
		{"set", own, "x", "px", 10000, "nx"},
		{"set", own, "y", "px", 10000, "nx"},
		{"wait", 0, 1},
		{"incrbyfloat", own + ":f", 1.5},
		{"nosuchcommand"},
	} {
		want := redis.NewCmd(ctx, with(args, key+":g")...)
		_ = gr.Process(ctx, want)
		got := redis.NewCmd(ctx, with(args, key+":r")...)
		_ = c.Process(ctx, got)
		if want.Err() != nil {
			require.Error(t, got.Err(), "%v", args)
			// rueidis drops the "ERR " of a generic error; go-redis's
			// HasErrorPrefix, which the engine uses, skips it as well.
			assert.Equal(t, strings.TrimPrefix(want.Err().Error(), "ERR "), got.Err().Error(), "%v", args)
			assert.Equal(t, errors.Is(want.Err(), redis.Nil), errors.Is(got.Err(), redis.Nil), "%v: redis.Nil", args)
			var wr, gre redis.Error
			assert.Equal(t, errors.As(want.Err(), &wr), errors.As(got.Err(), &gre), "%v: a server's error", args)
			continue
		}
		require.NoError(t, got.Err(), "%v", args)
		assert.Equal(t, want.Val(), got.Val(), "%v", args)
	}
	assert.True(t, redis.HasErrorPrefix(func() error {
		cmd := redis.NewCmd(ctx, "evalsha", "0000000000000000000000000000000000000000", 0)
		return c.Process(ctx, cmd)
	}(), "NOSCRIPT"), "the engine's NOSCRIPT check holds over rueidis")
}

// TestConnPipelineAndTx: a pipeline answers in order, and a transaction
// hands EXEC's replies to its commands.
func TestConnPipelineAndTx(t *testing.T) {
	ctx := t.Context()
	node := redistest.Nodes(t, 1)[0]
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{node.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c := newConn(rc)
	key := redistest.Key(t)
	set, get, missing := redis.NewCmd(ctx, "set", key, "v"), redis.NewCmd(ctx, "get", key), redis.NewCmd(ctx, "get", key+":m")
	c.Pipeline(ctx, []*redis.Cmd{set, get, missing})
	assert.Equal(t, "OK", set.Val())
	assert.Equal(t, "v", get.Val())
	assert.ErrorIs(t, missing.Err(), redis.Nil)

	get, missing = redis.NewCmd(ctx, "get", key), redis.NewCmd(ctx, "get", key+":m")
	ttl := redis.NewCmd(ctx, "pttl", key)
	err = c.Tx(ctx, []*redis.Cmd{get, missing, ttl})
	assert.ErrorIs(t, err, redis.Nil, "the first error: the missing key's")
	assert.Equal(t, "v", get.Val())
	assert.ErrorIs(t, missing.Err(), redis.Nil)
	assert.Equal(t, int64(-1), ttl.Val())

	bad := redis.NewCmd(ctx, "nosuchcommand")
	err = c.Tx(ctx, []*redis.Cmd{redis.NewCmd(ctx, "get", key), bad})
	var re redis.Error
	require.ErrorAs(t, err, &re, "a command refused while queued aborts the transaction")
	assert.ErrorAs(t, bad.Err(), &re)
}

// TestConnInfo: what the engine learns of a rueidis client.
func TestConnInfo(t *testing.T) {
	node := redistest.Nodes(t, 1)[0]
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{node.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	info := newConn(rc).Info()
	assert.Equal(t, node.Addr(), info.Addr)
	assert.Equal(t, redisconn.Standalone, info.Topology)
	assert.True(t, info.HonorsContext)
	assert.True(t, info.PubSub)
	assert.Nil(t, info.Client, "no go-redis client behind it")
	assert.Equal(t, any(rc), info.Identity)
}

// TestNewOverRueidis: the public constructors over live rueidis clients, a
// lock round trip, and coord's clear refusal (its own commands are go-redis
// calls, and Client.Clients has no go-redis client here).
func TestNewOverRueidis(t *testing.T) {
	ctx := t.Context()
	nodes := redistest.Nodes(t, 3)
	var rcs []rueidis.Client
	for _, n := range nodes {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.Addr()}, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		rcs = append(rcs, rc)
	}
	c, err := New(rcs, redlock.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	assert.Nil(t, c.Clients(), "no go-redis clients behind rueidis")
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "held")
	require.NoError(t, l.Release(ctx))
	_, err = coord.New(c)
	assert.ErrorIs(t, err, coord.ErrInvalid)

	_, err = New([]rueidis.Client{rcs[0], rcs[0]})
	assert.ErrorIs(t, err, redlock.ErrInvalid, "the same client twice")
	_, err = New([]rueidis.Client{rcs[0], nil})
	assert.ErrorIs(t, err, redlock.ErrInvalid, "a nil client")
	_, err = NewSingle(nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid, "a nil client")
	s, err := NewSingle(rcs[1], redlock.WithFencing())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	sm, err := s.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	sl, err := sm.TryLock(ctx)
	require.NoError(t, err)
	assert.Positive(t, sl.Token(), "a fencing token over rueidis")
	require.NoError(t, sl.Release(ctx))
}
