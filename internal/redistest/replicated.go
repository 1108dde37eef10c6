package redistest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
)

// ReplicatedTimeout bounds the waits of Replicated and WaitOnline.
const ReplicatedTimeout = 20 * time.Second

// Replicated starts a primary and replicas replicas of it (REPLICAOF), each
// on its own free loopback port, and waits until the primary reports every
// replica acknowledging writes (WaitOnline). The primary starts each full sync at once
// rather than after Redis 7's 5s diskless-sync delay. opts adjust the
// options of every node. Everything is closed when the test ends.
func Replicated(t testing.TB, replicas int, opts ...func(*redisnode.Options)) (primary *redisnode.Node, replicaNodes []*redisnode.Node) {
	t.Helper()
	if replicas < 1 {
		t.Fatalf("redistest: Replicated: %d replicas", replicas)
	}
	opts = append(opts, func(o *redisnode.Options) { o.Args = append(o.Args, "--repl-diskless-sync-delay", "0") })
	nodes := Nodes(t, 1+replicas, opts...)
	primary, replicaNodes = nodes[0], nodes[1:]
	for _, r := range replicaNodes {
		require.NoError(t, Client(t, r.Addr()).Do(t.Context(), "REPLICAOF", "127.0.0.1", primary.Port()).Err(),
			"redistest: REPLICAOF on %s", r.Addr())
	}
	WaitOnline(t, primary, replicas)
	return primary, replicaNodes
}

// WaitOnline waits, bounded by ReplicatedTimeout, until primary reports at
// least n replicas online and then n acknowledge a write with WAIT. The
// order matters: a write made before a replica's full sync is in the
// snapshot it loads, so WAIT counts the replica for it as soon as it is
// online; and a replica that the primary reports online may not acknowledge
// new writes yet (after a full sync, Redis 7.0 streams it the new writes
// only about a second later). The write sets and deletes the key
// redistest:online (or, on a Cluster primary, a key of its slots); a PUBLISH, which replicates too, would not count (WAIT
// waits for the connection's last write command).
func WaitOnline(t testing.TB, primary *redisnode.Node, n int) {
	t.Helper()
	ctx := t.Context()
	conn := Client(t, primary.Addr()).Conn()
	defer conn.Close()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		info, err := conn.Info(ctx, "replication").Result()
		if assert.NoError(c, err) {
			assert.GreaterOrEqual(c, strings.Count(info, ",state=online,"), n, "online replicas of %s", primary.Addr())
		}
	}, ReplicatedTimeout, 10*time.Millisecond, "redistest: the replicas of %s did not come online", primary.Addr())
	// A Cluster primary takes only keys of its own slots: find one.
	key := "redistest:online"
	for i := 0; i < 1000 && redis.HasErrorPrefix(conn.Set(ctx, key, "1", 0).Err(), "MOVED"); i++ {
		key = fmt.Sprintf("redistest:online:%d", i)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, conn.Set(ctx, key, "1", 0).Err())
		assert.NoError(c, conn.Del(ctx, key).Err())
		acked, err := conn.Do(ctx, "WAIT", n, 100).Int()
		if assert.NoError(c, err) {
			assert.GreaterOrEqual(c, acked, n, "replicas of %s that acknowledged", primary.Addr())
		}
	}, ReplicatedTimeout, 10*time.Millisecond, "redistest: the replicas of %s did not acknowledge a write", primary.Addr())
}
