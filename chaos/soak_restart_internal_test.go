package chaos

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
)

// TestSoakRestartEmpty checks both ways the soak restarts an AOFAlways
// node without persistence (soak_restart.go): deleting its files (the
// process backend) and, where it cannot, an isolated start and FLUSHALL.
// Either way the node comes back without the key it acknowledged, with a
// new run id, and its clients' links work again; a plain kill and restart
// (the control) keeps the key.
func TestSoakRestartEmpty(t *testing.T) {
	ctx := t.Context()
	nodes, err := processBackend(t).StartNodes(ctx, 1, NodeSpec{Persistence: AOFAlways})
	require.NoError(t, err)
	r := netRun(t, nodes, 2)
	node := nodes[0]

	state := func() (keys int64, runID string) {
		require.NoError(t, r.onNode(ctx, node, func(ctx context.Context, c *redis.Client) error {
			var err error
			if keys, err = c.DBSize(ctx).Result(); err != nil {
				return err
			}
			info, err := c.Info(ctx, "server").Result()
			for line := range strings.SplitSeq(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
					runID = v
				}
			}
			return err
		}))
		return keys, runID
	}
	set := func() {
		require.NoError(t, r.onNode(ctx, node, func(ctx context.Context, c *redis.Client) error {
			return c.Set(ctx, "acknowledged", "1", 0).Err()
		}))
	}
	throughLinks := func(what string) {
		for c := range r.nw.Clients() {
			rc := newRedisClient(r.nw.Addr(c, 0))
			assert.NoError(t, rc.Ping(ctx).Err(), "%s: client %d's link", what, c)
			assert.NoError(t, rc.Close())
		}
	}

	set()
	keys, before := state()
	require.Equal(t, int64(1), keys)
	require.NoError(t, errors.Join(r.kill(ctx, node), r.restart(ctx, node)))
	keys, after := state()
	assert.Equal(t, int64(1), keys, "control: a restart with persistence keeps the key")
	assert.NotEqual(t, before, after)

	for _, flush := range []bool{false, true} {
		what := fmt.Sprintf("flushRestart=%v", flush)
		set()
		_, before := state()
		in := &runInjector{ctx: ctx, r: r, targets: nodes, flushRestart: flush}
		require.NoError(t, r.kill(ctx, node), what)
		require.NoError(t, in.restartEmpty(ctx, 0), what)
		keys, after := state()
		assert.Zero(t, keys, "%s: the node comes back empty", what)
		assert.NotEqual(t, before, after, "%s: a new process", what)
		assert.False(t, r.down[node], what)
		throughLinks(what)
	}
}

// TestSoakRestartEmptyReplica: on Docker a node restarts with the
// configuration Sentinel rewrote, so a demoted primary comes back as a
// replica and refuses FLUSHALL (a soak stopped on that READONLY). The
// FLUSHALL way of a restart without persistence then leaves the node to
// its full resync: no error, and it comes back a replica in sync.
func TestSoakRestartEmptyReplica(t *testing.T) {
	ctx := t.Context()
	b := processBackend(t)
	primary, err := b.StartNodes(ctx, 1, NodeSpec{Persistence: AOFAlways})
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(primary[0].Addr())
	require.NoError(t, err)
	replica, err := b.StartNodes(ctx, 1, NodeSpec{Persistence: AOFAlways, Args: []string{"--replicaof", host, port}})
	require.NoError(t, err)
	r := netRun(t, replica, 1)
	require.NoError(t, r.onNode(ctx, primary[0], func(ctx context.Context, c *redis.Client) error {
		return c.Set(ctx, "k", "v", 0).Err()
	}))

	in := &runInjector{ctx: ctx, r: r, targets: replica, flushRestart: true}
	require.NoError(t, r.kill(ctx, replica[0]))
	require.NoError(t, in.restartEmpty(ctx, 0))
	assert.False(t, r.down[replica[0]])
	require.NoError(t, r.onNode(ctx, replica[0], func(ctx context.Context, c *redis.Client) error {
		return waitReplicaUp(ctx, c, 20*time.Second)
	}))
	require.NoError(t, r.onNode(ctx, replica[0], func(ctx context.Context, c *redis.Client) error {
		v, err := c.Get(ctx, "k").Result()
		assert.Equal(t, "v", v, "the replica holds its primary's data after the resync")
		return err
	}))
}

// processBackend returns a process backend that is closed when the test ends.
func processBackend(t *testing.T) *ProcessBackend {
	b := NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

// netRun returns a run over nodes behind a Network for clients clients,
// closed when the test ends, for tests of the run's node faults.
func netRun(t *testing.T, nodes []Node, clients int) *run {
	nw, err := NewNetwork(nodes, clients)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nw.Close()) })
	return &run{h: NewHistory(), nodes: nodes, nw: nw, down: map[Node]bool{}, paused: map[Node]bool{}}
}
