package chaos_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

// TestProcessSentinels starts a node, a replica of it and a Sentinel on
// the process backend: the Sentinel monitors the node at its Addr and
// finds the replica at its Addr too.
func TestProcessSentinels(t *testing.T) {
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	ctx := procCtx(t, time.Minute)
	nodes, err := b.StartNodes(ctx, 2, chaos.NodeSpec{})
	require.NoError(t, err)
	checkSentinels(t, b, nodes)
}

// checkSentinels makes nodes[1] a replica of nodes[0] at its Addr, starts
// one Sentinel on b monitoring nodes[0] there, and asserts that the
// Sentinel names nodes[0] as the primary, up, and sees nodes[1] as its
// replica at nodes[1]'s Addr: every backend's nodes reach each other where
// this process reaches them.
func checkSentinels(t *testing.T, b chaos.SentinelBackend, nodes []chaos.Node) {
	t.Helper()
	ctx := procCtx(t, time.Minute)
	pp, rp := nodes[0].Addr(), nodes[1].Addr()
	host, port, err := net.SplitHostPort(pp)
	require.NoError(t, err)
	rc := redis.NewClient(&redis.Options{Addr: nodes[1].Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	require.NoError(t, rc.Do(ctx, "REPLICAOF", host, port).Err())
	require.Eventually(t, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 20*time.Second, 20*time.Millisecond, "the replica reaches the primary at %s", pp)

	conf := fmt.Sprintf("sentinel monitor m %s %s 1\nsentinel down-after-milliseconds m 1000\n", host, port)
	sentinels, err := b.StartSentinels(ctx, 1, conf)
	require.NoError(t, err)
	require.Len(t, sentinels, 1)
	assert.Equal(t, "s0", sentinels[0].Name())
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0].Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = sc.Close() })
	addr, err := sc.GetMasterAddrByName(ctx, "m").Result()
	require.NoError(t, err)
	assert.Equal(t, pp, net.JoinHostPort(addr[0], addr[1]))
	require.Eventually(t, func() bool {
		m, err := sc.Master(ctx, "m").Result()
		if err != nil || m["flags"] != "master" {
			return false
		}
		replicas, err := sc.Replicas(ctx, "m").Result()
		return err == nil && len(replicas) == 1 && net.JoinHostPort(replicas[0]["ip"], replicas[0]["port"]) == rp && replicas[0]["flags"] == "slave"
	}, 20*time.Second, 50*time.Millisecond, "the Sentinel sees the primary up and its replica at %s", rp)
}
