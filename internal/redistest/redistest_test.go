package redistest_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

func TestNodesAndClients(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 3)
	require.Len(t, nodes, 3)
	clients := redistest.Clients(t, nodes)
	require.Len(t, clients, 3)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	key := redistest.Key(t)
	for i, c := range clients {
		require.NoError(t, c.Set(ctx, key, i, 0).Err())
	}
	for i, c := range clients {
		got, err := c.Get(ctx, key).Int()
		require.NoError(t, err)
		assert.Equal(t, i, got, "each client talks to its own node")
	}
}

func TestNodesAppliesOptions(t *testing.T) {
	t.Parallel()
	nodes := redistest.Nodes(t, 1, func(o *redisnode.Options) { o.AppendFsyncAlways = true }, nil)
	c := redistest.Client(t, nodes[0].Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cfg, err := c.ConfigGet(ctx, "appendfsync").Result()
	require.NoError(t, err)
	assert.Equal(t, "always", cfg["appendfsync"])
}

func TestClientFailsFastOnDeadNode(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	c := redistest.Client(t, node.Addr())
	require.NoError(t, node.Kill())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.Error(t, c.Ping(ctx).Err())
	assert.Less(t, time.Since(start), time.Second, "no dial retries against a dead node")
}

// fatalTB records Fatalf instead of failing the surrounding test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNodesFailsWithoutBinary(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Nodes(tb, 2, func(o *redisnode.Options) { o.Binary = "/nonexistent/redis-server" })
		t.Error("Nodes returned instead of failing the test")
	}()
	<-done
	assert.Contains(t, tb.msg, redisnode.ErrNoBinary.Error())
}

func TestKey(t *testing.T) {
	t.Parallel()
	a, b := redistest.Key(t), redistest.Key(t)
	assert.NotEqual(t, a, b, "unique per call")
	assert.Regexp(t, `^TestKey-[0-9a-f]{8}$`, a)

	t.Run("sub test/with spaces:and*globs", func(t *testing.T) {
		k := redistest.Key(t)
		assert.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9_.-]+-[0-9a-f]{8}$`), k)
		assert.Contains(t, k, "TestKey_sub_test_with_spaces_and_globs-")
	})
}

func TestSentinel(t *testing.T) {
	rig := redistest.Sentinel(t, 2)
	require.Len(t, rig.Replicas, 2)
	require.Len(t, rig.Sentinels, redistest.SentinelSentinels)
	ctx := t.Context()
	fc := rig.FailoverClient(t)
	require.NoError(t, fc.Set(ctx, "k", "v", 0).Err())
	info, err := fc.Info(ctx, "server").Result()
	require.NoError(t, err)
	assert.Contains(t, info, fmt.Sprintf("tcp_port:%d\r", rig.Primary.Port()), "the failover client reaches the primary")
	assert.Same(t, rig.Primary, rig.Node(rig.Primary.Addr()))
	assert.Nil(t, rig.Node("127.0.0.1:1"))
	// The replicas got the write (WAIT: replication is asynchronous).
	acked, err := fc.Do(ctx, "WAIT", 2, 5000).Int()
	require.NoError(t, err)
	assert.Equal(t, 2, acked)
	for _, r := range rig.Replicas {
		v, err := redistest.Client(t, r.Addr()).Get(ctx, "k").Result()
		require.NoError(t, err)
		assert.Equal(t, "v", v)
	}
}
