package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/freeport"
	"github.com/redfence/redfence/internal/redisnode"
)

// EnvRedisCLI names the environment variable consulted for the redis-cli
// path; empty means "redis-cli" looked up on PATH.
const EnvRedisCLI = "REDFENCE_REDIS_CLI"

// ClusterNodeTimeout is the cluster-node-timeout of nodes started by Cluster.
const ClusterNodeTimeout = 2 * time.Second

// ClusterConvergeTimeout bounds the wait, after redis-cli created the
// cluster, until every node reports cluster_state:ok.
const ClusterConvergeTimeout = 20 * time.Second

// clusterCreateTimeout bounds redis-cli --cluster create.
const clusterCreateTimeout = 60 * time.Second

// Cluster starts a Redis Cluster of primaries (at least 3) and no replicas:
// one redis-server per primary, each with its own ports and temporary
// directory, joined by redis-cli --cluster create. It waits, up to
// ClusterConvergeTimeout, until every node reports cluster_state:ok with
// all slots assigned, and returns a ClusterClient that honours context
// deadlines, uses ClientTimeout, does not retry dials and follows up to 3
// redirections. Client and nodes close when the test ends. A missing
// redis-cli (Debian: redis-tools) or redis-server fails the test;
// $REDFENCE_REDIS_CLI names another redis-cli.
func Cluster(t testing.TB, primaries int) *redis.ClusterClient {
	t.Helper()
	cc, _ := startCluster(t, primaries, 0)
	return cc
}

// ClusterWithReplicas is Cluster with replicas asynchronous replicas per
// primary (placed by redis-cli); it also waits until every replica's link
// to its primary is up. It returns the nodes too, in no particular role
// order, so that tests can pause, kill and fail them over; INFO replication
// tells primaries and replicas apart.
func ClusterWithReplicas(t testing.TB, primaries, replicas int) (*redis.ClusterClient, []*redisnode.Node) {
	t.Helper()
	if replicas < 0 {
		t.Fatalf("redistest: ClusterWithReplicas: %d replicas per primary", replicas)
	}
	return startCluster(t, primaries, replicas)
}

func startCluster(t testing.TB, primaries, replicas int) (*redis.ClusterClient, []*redisnode.Node) {
	t.Helper()
	if primaries < 3 {
		t.Fatalf("redistest: Cluster: %d primaries: Redis Cluster needs at least 3", primaries)
	}
	cli, err := redisCLI()
	if err != nil {
		t.Fatalf("redistest: Cluster: %v", err)
	}
	ctx := t.Context()
	total := primaries * (1 + replicas)
	nodes := make([]*redisnode.Node, 0, total)
	addrs := make([]string, 0, total)
	for i := 0; i < total; i++ {
		node, err := startClusterNode(ctx)
		if err != nil {
			t.Fatalf("redistest: Cluster: starting node %d of %d: %v", i+1, total, err)
		}
		t.Cleanup(func() {
			if err := node.Close(); err != nil {
				t.Errorf("redistest: closing cluster node %s: %v", node.Addr(), err)
			}
		})
		nodes = append(nodes, node)
		addrs = append(addrs, node.Addr())
	}

	cctx, cancel := context.WithTimeout(ctx, clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cmd := exec.CommandContext(cctx, cli, args...)
	cmd.Env = append(os.Environ(), "REDISCLI_HISTFILE=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: Cluster: %s %s: %v\n%s", cli, strings.Join(args, " "), err, out)
	}

	nodeClients := make([]*redis.Client, len(addrs))
	for i, addr := range addrs {
		nodeClients[i] = Client(t, addr)
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(total),
		"cluster_size":           strconv.Itoa(primaries),
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i, nc := range nodeClients {
			info, err := nc.ClusterInfo(ctx).Result()
			if !assert.NoError(c, err, "CLUSTER INFO on %s", addrs[i]) {
				continue
			}
			got := parseInfo(info)
			for k, v := range want {
				assert.Equal(c, v, got[k], "%s on %s", k, addrs[i])
			}
			if replicas == 0 {
				continue
			}
			info, err = nc.Info(ctx, "replication").Result()
			if !assert.NoError(c, err, "INFO replication on %s", addrs[i]) {
				continue
			}
			if got := parseInfo(info); got["role"] == "slave" {
				assert.Equal(c, "up", got["master_link_status"], "replication link of %s", addrs[i])
			}
		}
	}, ClusterConvergeTimeout, 50*time.Millisecond, "redistest: Cluster: the cluster did not converge")

	cc := redis.NewClusterClient(universalOptions(addrs...).Cluster())
	closeAtEnd(t, cc, "cluster client")
	// The client learns the slot map from one node; make sure its view
	// already reaches every primary.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var mu sync.Mutex
		seen := map[string]bool{}
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			seen[m.Options().Addr] = true
			mu.Unlock()
			return m.Ping(ctx).Err()
		})
		assert.NoError(c, err)
		assert.Len(c, seen, primaries, "primaries reached through the cluster client")
	}, ClusterConvergeTimeout, 50*time.Millisecond, "redistest: Cluster: the client's view of the cluster is incomplete")
	return cc, nodes
}

// redisCLI finds the redis-cli executable.
func redisCLI() (string, error) {
	name, source := "redis-cli", "PATH"
	if env := os.Getenv(EnvRedisCLI); env != "" {
		name, source = env, "$"+EnvRedisCLI
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("redis-cli not found (looked for %q from %s: %w): it creates the cluster; install it (Debian: apt-get install redis-tools, which redis-server depends on) or set %s to its path", name, source, err, EnvRedisCLI)
	}
	return path, nil
}

// startClusterNode starts one cluster-enabled node with its own bus port,
// picking another bus port if the one picked was taken meanwhile.
func startClusterNode(ctx context.Context) (*redisnode.Node, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var bus int
		if bus, err = freeport.Pick(); err != nil {
			return nil, err
		}
		var node *redisnode.Node
		node, err = redisnode.Start(ctx, redisnode.Options{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout.Milliseconds())),
			// Without cluster-port the bus is port+10000, which can exceed
			// 65535 for a port from the ephemeral range.
			"--cluster-port", strconv.Itoa(bus),
		}})
		if err == nil {
			return node, nil
		}
		if !isBindFailure(err) {
			return nil, err
		}
	}
	return nil, err
}

// isBindFailure reports whether err is redis-server failing to bind a port.
func isBindFailure(err error) bool {
	var se *redisnode.StartError
	return errors.As(err, &se) && strings.Contains(se.LogTail, "Address already in use")
}

// parseInfo parses "key:value" lines of INFO or CLUSTER INFO.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
