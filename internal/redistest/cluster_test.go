package redistest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// The rig gives a working 3-primary cluster: every slot is served, each
// primary owns a share, keys in different slots land on different primaries
// and are readable through the cluster client, and a node asked directly
// for a key it does not own redirects.
func TestClusterRig(t *testing.T) {
	t.Parallel()
	cc := redistest.Cluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	shards, err := cc.ClusterShards(ctx).Result()
	require.NoError(t, err)
	require.Len(t, shards, 3)
	covered := int64(0)
	for _, sh := range shards {
		require.Len(t, sh.Nodes, 1, "no replicas")
		assert.Equal(t, "master", sh.Nodes[0].Role)
		owned := int64(0)
		for _, r := range sh.Slots {
			owned += r.End - r.Start + 1
		}
		assert.Greater(t, owned, int64(5000), "%s:%d owns about a third of the slots", sh.Nodes[0].IP, sh.Nodes[0].Port)
		covered += owned
	}
	assert.Equal(t, int64(16384), covered)

	// One key per primary, found by asking the cluster which primary owns
	// each candidate's slot.
	byOwner := map[string]string{}
	for i := 0; len(byOwner) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("%s-%d", redistest.Key(t), i)
		m, err := cc.MasterForKey(ctx, key)
		require.NoError(t, err)
		if _, ok := byOwner[m.Options().Addr]; !ok {
			byOwner[m.Options().Addr] = key
		}
	}
	require.Len(t, byOwner, 3)
	for addr, key := range byOwner {
		require.NoError(t, cc.Set(ctx, key, addr, time.Minute).Err())
		got, err := cc.Get(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, addr, got)

		direct := redistest.Client(t, addr)
		got, err = direct.Get(ctx, key).Result()
		require.NoError(t, err, "the owner serves the key")
		assert.Equal(t, addr, got)
		for other := range byOwner {
			if other == addr {
				continue
			}
			err := redistest.Client(t, other).Get(ctx, key).Err()
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "MOVED "), "another primary redirects: %v", err)
		}
	}

	info, err := redistest.Client(t, cc.Options().Addrs[0]).ClusterInfo(ctx).Result()
	require.NoError(t, err)
	assert.Contains(t, info, "cluster_state:ok")
	assert.Contains(t, info, "cluster_known_nodes:3")
}

func TestClusterNeedsThreePrimaries(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	var cc *redis.ClusterClient
	go func() {
		defer close(done)
		cc = redistest.Cluster(tb, 2)
	}()
	<-done
	assert.Nil(t, cc)
	assert.Contains(t, tb.msg, "needs at least 3")
}

func TestClusterFailsWithoutRedisCLI(t *testing.T) {
	t.Setenv(redistest.EnvRedisCLI, "/nonexistent/redis-cli")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Cluster(tb, 3)
		t.Error("Cluster returned instead of failing the test")
	}()
	<-done
	assert.Contains(t, tb.msg, "redis-cli not found")
	assert.Contains(t, tb.msg, "redis-tools")
}

// With replicas: every primary has exactly one replica, linked and
// receiving its writes.
func TestClusterWithReplicasRig(t *testing.T) {
	t.Parallel()
	cc, nodes := redistest.ClusterWithReplicas(t, 3, 1)
	require.Len(t, nodes, 6)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	replicasOf := map[string]int{}
	primaries := 0
	for _, n := range nodes {
		info, err := redistest.Client(t, n.Addr()).Info(ctx, "replication").Result()
		require.NoError(t, err)
		switch {
		case strings.Contains(info, "role:master"):
			primaries++
			assert.Contains(t, info, "connected_slaves:1", "%s", n.Addr())
		case strings.Contains(info, "role:slave"):
			assert.Contains(t, info, "master_link_status:up", "%s", n.Addr())
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_port:"); ok {
					replicasOf[v]++
				}
			}
		default:
			t.Fatalf("no role in INFO replication of %s: %s", n.Addr(), info)
		}
	}
	assert.Equal(t, 3, primaries)
	assert.Len(t, replicasOf, 3, "each primary has a replica")

	key := redistest.Key(t)
	require.NoError(t, cc.Set(ctx, key, "v", time.Minute).Err())
	m, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	acked, err := m.Do(ctx, "WAIT", 1, 5000).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, acked, "the replica acknowledged the write")
}
