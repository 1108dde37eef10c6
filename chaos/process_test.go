package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/internal/redistest"
)

// procCtx returns a context that ends after d or with the test.
func procCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// procNodes starts n nodes on a fresh process backend closed with the test.
func procNodes(t *testing.T, n int, spec chaos.NodeSpec) []chaos.Node {
	t.Helper()
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	nodes, err := b.StartNodes(procCtx(t, 30*time.Second), n, spec)
	require.NoError(t, err)
	require.Len(t, nodes, n)
	return nodes
}

// isTimeout reports whether err is a deadline or I/O timeout, as opposed to
// a refused or reset connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// pingWithin pings through c with a deadline of d.
func pingWithin(t *testing.T, c *redis.Client, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

func TestProcessBackendStartsNamedNodes(t *testing.T) {
	t.Parallel()
	nodes := procNodes(t, 3, chaos.NodeSpec{Args: []string{"--maxclients", "123"}})
	seen := map[string]bool{}
	for i, n := range nodes {
		assert.Equal(t, fmt.Sprintf("n%d", i), n.Name())
		assert.True(t, strings.HasPrefix(n.Addr(), "127.0.0.1:"), n.Addr())
		assert.False(t, seen[n.Addr()], "addresses are distinct")
		seen[n.Addr()] = true
		c := redistest.Client(t, n.Addr())
		require.NoError(t, c.Ping(procCtx(t, 5*time.Second)).Err())
		cfg, err := c.ConfigGet(procCtx(t, 5*time.Second), "maxclients").Result()
		require.NoError(t, err)
		assert.Equal(t, "123", cfg["maxclients"], "NodeSpec.Args reach redis-server")
	}
	assert.Equal(t, "process", chaos.NewProcessBackend().Name())
}

func TestProcessKillStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		persistence chaos.Persistence
		wantKept    bool
	}{
		{"no persistence comes back empty", chaos.NoPersistence, false},
		{"aof always keeps keys", chaos.AOFAlways, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node := procNodes(t, 1, chaos.NodeSpec{Persistence: tc.persistence})[0]
			addr := node.Addr()
			ctx := procCtx(t, 20*time.Second)
			c := redistest.Client(t, addr)
			require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

			require.NoError(t, node.Kill(ctx))
			err := pingWithin(t, c, time.Second)
			require.Error(t, err, "a killed node must not answer")
			assert.False(t, isTimeout(err), "a killed node refuses, it does not hang: %v", err)
			require.NoError(t, node.Kill(ctx), "killing a dead node is fine")

			require.NoError(t, node.Start(ctx))
			assert.Equal(t, addr, node.Addr(), "same address after Start")
			require.NoError(t, node.Start(ctx), "starting a running node does nothing")
			got, err := c.Get(ctx, "k").Result()
			if tc.wantKept {
				require.NoError(t, err)
				assert.Equal(t, "v", got)
			} else {
				assert.ErrorIs(t, err, redis.Nil, "the node restarted empty")
			}
		})
	}
}

func TestProcessRDBSnapshot(t *testing.T) {
	t.Parallel()
	node := procNodes(t, 1, chaos.NodeSpec{Persistence: chaos.RDBSnapshot})[0]
	ctx := procCtx(t, 20*time.Second)
	c := redistest.Client(t, node.Addr())
	cfg, err := c.ConfigGet(ctx, "save").Result()
	require.NoError(t, err)
	assert.Empty(t, cfg["save"], "no automatic snapshots")
	require.NoError(t, c.Set(ctx, "before", "v", 0).Err())
	require.NoError(t, c.Save(ctx).Err())
	require.NoError(t, c.Set(ctx, "after", "v", 0).Err())

	require.NoError(t, node.Kill(ctx))
	require.NoError(t, node.Start(ctx))
	c = redistest.Client(t, node.Addr())
	got, err := c.Get(ctx, "before").Result()
	require.NoError(t, err, "the restart loads the snapshot")
	assert.Equal(t, "v", got)
	assert.ErrorIs(t, c.Get(ctx, "after").Err(), redis.Nil, "a write after the SAVE is lost")
}

func TestProcessPauseResume(t *testing.T) {
	t.Parallel()
	node := procNodes(t, 1, chaos.NodeSpec{})[0]
	ctx := procCtx(t, 20*time.Second)
	c := redistest.Client(t, node.Addr())
	require.NoError(t, pingWithin(t, c, 2*time.Second))

	require.NoError(t, node.Pause(ctx))
	err := pingWithin(t, c, 200*time.Millisecond)
	require.Error(t, err, "a paused node must not answer")
	assert.True(t, isTimeout(err), "a paused node hangs: %v", err)

	require.NoError(t, node.Resume(ctx))
	require.NoError(t, pingWithin(t, c, 2*time.Second))
}

func TestProcessClockOffset(t *testing.T) {
	t.Parallel()
	nodes := procNodes(t, 2, chaos.NodeSpec{Clock: true})
	ctx := procCtx(t, 20*time.Second)
	skewed := redistest.Client(t, nodes[0].Addr())
	other := redistest.Client(t, nodes[1].Addr())
	for _, c := range []*redis.Client{skewed, other} {
		require.NoError(t, c.Set(ctx, "lock", "a", 10*time.Second).Err())
	}

	require.NoError(t, nodes[0].SetClockOffset(ctx, 0))
	assert.Equal(t, "a", skewed.Get(ctx, "lock").Val(), "offset 0: the key stays")

	require.NoError(t, nodes[0].SetClockOffset(ctx, 30*time.Second))
	ok, err := skewed.SetNX(ctx, "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok, "+30s: the PX 10000 key expired, so SET NX succeeds")
	ok, err = other.SetNX(ctx, "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "the other node's clock is untouched")

	// The offset survives Kill and Start.
	require.NoError(t, nodes[0].Kill(ctx))
	require.NoError(t, nodes[0].Start(ctx))
	now, err := skewed.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, 30, time.Until(now).Seconds(), 2, "the restarted node still runs 30s ahead")

	plain := procNodes(t, 1, chaos.NodeSpec{})[0]
	err = plain.SetClockOffset(ctx, time.Second)
	require.ErrorIs(t, err, chaos.ErrNoClock)
	assert.Contains(t, err.Error(), "NodeSpec.Clock")
}

func TestProcessBackendClose(t *testing.T) {
	t.Parallel()
	b := chaos.NewProcessBackend()
	ctx := procCtx(t, 20*time.Second)
	nodes, err := b.StartNodes(ctx, 2, chaos.NodeSpec{Clock: true})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	for _, n := range nodes {
		err := pingWithin(t, redistest.Client(t, n.Addr()), time.Second)
		assert.Error(t, err, "Close stops %s", n.Name())
		assert.Error(t, n.Start(ctx), "a closed node cannot start")
	}
	require.NoError(t, b.Close(), "Close is idempotent")
	_, err = b.StartNodes(ctx, 1, chaos.NodeSpec{})
	assert.ErrorIs(t, err, chaos.ErrBackendClosed)
}

func TestProcessBackendInvalidInput(t *testing.T) {
	t.Parallel()
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	ctx := procCtx(t, 10*time.Second)
	_, err := b.StartNodes(ctx, 0, chaos.NodeSpec{})
	assert.Error(t, err)
	_, err = b.StartNodes(ctx, 1, chaos.NodeSpec{Persistence: chaos.Persistence(42)})
	assert.Error(t, err)
	//nolint:staticcheck // a nil context is the bad input under test
	_, err = b.StartNodes(nil, 1, chaos.NodeSpec{})
	assert.Error(t, err)

	bad := chaos.NewProcessBackend(chaos.WithRedisServer("/nonexistent/redis-server"), nil)
	_, err = bad.StartNodes(ctx, 1, chaos.NodeSpec{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis-server not found")
	assert.NoError(t, bad.Close())
}
