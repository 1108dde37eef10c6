package docker_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
)

// A container reaches a proxy of a chaos.Network, which listens on
// 127.0.0.1 (the containers are on the host's network): a replica
// replicates from its primary through one, as in scenario 7.
func TestContainersReachProxies(t *testing.T) {
	b := newBackend(t)
	nodes := startNodes(t, b, 2, chaos.NodeSpec{Args: []string{"--repl-diskless-sync-delay", "0"}})

	nw, err := chaos.NewNetwork(nodes[:1], 1)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nw.Close()) })
	link, err := nw.AddLink("replication", nodes[0].Addr())
	require.NoError(t, err)
	lh, lp, err := net.SplitHostPort(link.Addr())
	require.NoError(t, err)

	ctx := ctxOp(t)
	primary, replica := redisClient(t, nodes[0].Addr()), redisClient(t, nodes[1].Addr())
	require.NoError(t, primary.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, replica.Do(ctx, "REPLICAOF", lh, lp).Err())
	assert.Eventually(t, func() bool {
		info, err := replica.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up") && replica.Get(ctx, "k").Val() == "v"
	}, 20*time.Second, 50*time.Millisecond, "the replica synced through the proxy on %s", link.Addr())
}
