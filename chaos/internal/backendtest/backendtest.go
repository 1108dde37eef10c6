// Package backendtest is the conformance suite of chaos backends: what
// every chaos.Backend and its Nodes do, whichever way they run
// redis-server (the process backend, chaos/docker). Each backend's tests
// run it, and test apart only what is theirs alone.
package backendtest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/internal/redistest"
)

// Errs are a backend's own errors for the failures the suite provokes.
type Errs struct {
	NotRunning error // Pause or Resume of a killed node
	NoClock    error // SetClockOffset of a node started without NodeSpec.Clock
	Closed     error // StartNodes once the backend is closed
}

// opTimeout bounds each operation of the suite (a docker start can take
// seconds on a loaded machine).
const opTimeout = time.Minute

// Run runs the suite on backends from newBackend, which closes each when
// the test ends (checking the error). The subtests run in parallel, on
// one backend but for Close's, each on nodes of its own.
func Run(t *testing.T, newBackend func(t *testing.T) chaos.Backend, errs Errs) {
	b := newBackend(t)
	t.Run("NodesServe", func(t *testing.T) { nodesServe(t, b) })
	t.Run("KillStart", func(t *testing.T) { killStart(t, b, errs) })
	t.Run("RDBSnapshotRestart", func(t *testing.T) { rdbSnapshot(t, b) })
	t.Run("PauseResume", func(t *testing.T) { pauseResume(t, b) })
	t.Run("ClockOffset", func(t *testing.T) { clockOffset(t, b, errs) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, b) })
	t.Run("Close", func(t *testing.T) { closeBackend(t, newBackend(t), errs) })
}

func ctxOp(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func startNodes(t *testing.T, b chaos.Backend, n int, spec chaos.NodeSpec) []chaos.Node {
	t.Helper()
	nodes, err := b.StartNodes(ctxOp(t), n, spec)
	require.NoError(t, err)
	require.Len(t, nodes, n)
	return nodes
}

// pingWithin pings addr through a fresh connection bounded by d. (The
// default pool size: with a pool of one, a failed dial would leave go-redis
// redialling for a second after Close, which goleak sees.)
func pingWithin(t *testing.T, addr string, d time.Duration) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

// isTimeout reports whether err is a deadline or I/O timeout, as opposed to
// a refused or reset connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// Nodes are named n0, n1, ... on distinct loopback addresses, each with
// data of its own, and NodeSpec.Args reach redis-server.
func nodesServe(t *testing.T, b chaos.Backend) {
	t.Parallel()
	nodes := startNodes(t, b, 3, chaos.NodeSpec{Args: []string{"--maxclients", "123"}})
	seen := map[string]bool{}
	for i, n := range nodes {
		assert.Equal(t, []string{"n0", "n1", "n2"}[i], n.Name())
		host, _, err := net.SplitHostPort(n.Addr())
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		assert.False(t, seen[n.Addr()], "addresses are distinct")
		seen[n.Addr()] = true
		c := redistest.Client(t, n.Addr())
		cfg, err := c.ConfigGet(ctxOp(t), "maxclients").Result()
		require.NoError(t, err)
		assert.Equal(t, "123", cfg["maxclients"], "NodeSpec.Args reach redis-server")
		require.NoError(t, c.Set(ctxOp(t), "k", n.Name(), 0).Err())
	}
	for _, n := range nodes {
		got, err := redistest.Client(t, n.Addr()).Get(ctxOp(t), "k").Result()
		require.NoError(t, err)
		assert.Equal(t, n.Name(), got, "each node has its own data")
	}
}

// A killed node does not answer and cannot be paused or resumed; Kill and
// Start are idempotent, Start keeps the address, and the node comes back
// with its data under AOFAlways and empty without persistence.
func killStart(t *testing.T, b chaos.Backend, errs Errs) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		spec    chaos.NodeSpec
		keepKey bool
	}{
		{"NoPersistence", chaos.NodeSpec{Persistence: chaos.NoPersistence}, false},
		{"AOFAlways", chaos.NodeSpec{Persistence: chaos.AOFAlways}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := startNodes(t, b, 1, tt.spec)[0]
			addr := n.Addr()
			require.NoError(t, redistest.Client(t, addr).Set(ctxOp(t), "k", "v", 0).Err())

			require.NoError(t, n.Kill(ctxOp(t)))
			assert.Error(t, pingWithin(t, addr, 2*time.Second), "a killed node does not answer")
			assert.NoError(t, n.Kill(ctxOp(t)), "Kill is idempotent")
			assert.ErrorIs(t, n.Pause(ctxOp(t)), errs.NotRunning)
			assert.ErrorIs(t, n.Resume(ctxOp(t)), errs.NotRunning)

			require.NoError(t, n.Start(ctxOp(t)))
			assert.Equal(t, addr, n.Addr(), "the address is stable across Kill and Start")
			assert.NoError(t, n.Start(ctxOp(t)), "Start is idempotent")
			got, err := redistest.Client(t, addr).Get(ctxOp(t), "k").Result()
			if tt.keepKey {
				require.NoError(t, err)
				assert.Equal(t, "v", got)
			} else {
				assert.ErrorIs(t, err, redis.Nil, "a node without persistence comes back empty")
			}
		})
	}
}

// RDBSnapshot takes no automatic snapshots: a restart loads the last SAVE
// and loses what came after it.
func rdbSnapshot(t *testing.T, b chaos.Backend) {
	t.Parallel()
	n := startNodes(t, b, 1, chaos.NodeSpec{Persistence: chaos.RDBSnapshot})[0]
	c := redistest.Client(t, n.Addr())
	cfg, err := c.ConfigGet(ctxOp(t), "save").Result()
	require.NoError(t, err)
	assert.Empty(t, cfg["save"], "no automatic snapshots")
	require.NoError(t, c.Set(ctxOp(t), "before", "v", 0).Err())
	require.NoError(t, c.Save(ctxOp(t)).Err())
	require.NoError(t, c.Set(ctxOp(t), "after", "v", 0).Err())

	require.NoError(t, n.Kill(ctxOp(t)))
	require.NoError(t, n.Start(ctxOp(t)))
	c = redistest.Client(t, n.Addr())
	got, err := c.Get(ctxOp(t), "before").Result()
	require.NoError(t, err, "the restart loads the snapshot")
	assert.Equal(t, "v", got)
	assert.ErrorIs(t, c.Get(ctxOp(t), "after").Err(), redis.Nil, "a write after the SAVE is lost")
}

// A paused node hangs (a PING times out rather than being refused) and
// keeps its data; Pause and Resume are idempotent, and a paused node can
// be killed and started again.
func pauseResume(t *testing.T, b chaos.Backend) {
	t.Parallel()
	n := startNodes(t, b, 1, chaos.NodeSpec{Persistence: chaos.AOFAlways})[0]
	require.NoError(t, redistest.Client(t, n.Addr()).Set(ctxOp(t), "k", "v", 0).Err())

	require.NoError(t, n.Pause(ctxOp(t)))
	require.NoError(t, n.Pause(ctxOp(t)), "Pause is idempotent")
	err := pingWithin(t, n.Addr(), 200*time.Millisecond)
	require.Error(t, err, "a paused node does not answer")
	assert.True(t, isTimeout(err), "the PING times out rather than being refused: %v", err)

	require.NoError(t, n.Resume(ctxOp(t)))
	require.NoError(t, n.Resume(ctxOp(t)), "Resume is idempotent")
	require.NoError(t, pingWithin(t, n.Addr(), 2*time.Second))
	got, err := redistest.Client(t, n.Addr()).Get(ctxOp(t), "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got, "a pause keeps the data")

	require.NoError(t, n.Pause(ctxOp(t)))
	require.NoError(t, n.Kill(ctxOp(t)), "a paused node can be killed")
	require.NoError(t, n.Start(ctxOp(t)))
	got, err = redistest.Client(t, n.Addr()).Get(ctxOp(t), "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)
}

// SetClockOffset moves one node's clock, as Redis sees it, at once: keys
// expire by it, the other nodes' clocks are untouched, the offset can be
// set back and lasts across Kill and Start. A node started without
// NodeSpec.Clock refuses it.
func clockOffset(t *testing.T, b chaos.Backend, errs Errs) {
	t.Parallel()
	nodes := startNodes(t, b, 2, chaos.NodeSpec{Clock: true})
	skewed, other := redistest.Client(t, nodes[0].Addr()), redistest.Client(t, nodes[1].Addr())
	for _, c := range []*redis.Client{skewed, other} {
		require.NoError(t, c.Set(ctxOp(t), "lock", "a", 10*time.Second).Err())
	}

	require.NoError(t, nodes[0].SetClockOffset(ctxOp(t), 0))
	assert.Equal(t, "a", skewed.Get(ctxOp(t), "lock").Val(), "offset 0: the key stays")
	require.NoError(t, nodes[0].SetClockOffset(ctxOp(t), 30*time.Second))
	assert.ErrorIs(t, skewed.Get(ctxOp(t), "lock").Err(), redis.Nil, "+30s: the key expired on the node's clock")
	ok, err := skewed.SetNX(ctxOp(t), "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok, "SET NX succeeds again after the jump")
	ok, err = other.SetNX(ctxOp(t), "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "the other node's clock is untouched")

	require.NoError(t, nodes[0].Kill(ctxOp(t)))
	require.NoError(t, nodes[0].Start(ctxOp(t)))
	now, err := redistest.Client(t, nodes[0].Addr()).Time(ctxOp(t)).Result()
	require.NoError(t, err)
	assert.InDelta(t, 30, time.Until(now).Seconds(), 2, "the restarted node still runs 30s ahead")

	require.NoError(t, nodes[0].SetClockOffset(ctxOp(t), 0))
	now, err = redistest.Client(t, nodes[0].Addr()).Time(ctxOp(t)).Result()
	require.NoError(t, err)
	assert.InDelta(t, 0, time.Until(now).Seconds(), 2, "the offset is set back")

	plain := startNodes(t, b, 1, chaos.NodeSpec{})[0]
	err = plain.SetClockOffset(ctxOp(t), time.Second)
	require.ErrorIs(t, err, errs.NoClock)
	assert.Contains(t, err.Error(), "NodeSpec.Clock")
}

// StartNodes refuses no nodes, fewer than none, and a persistence it does
// not know.
func badInput(t *testing.T, b chaos.Backend) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		_, err := b.StartNodes(ctxOp(t), n, chaos.NodeSpec{})
		assert.Error(t, err, "%d nodes", n)
	}
	_, err := b.StartNodes(ctxOp(t), 1, chaos.NodeSpec{Persistence: chaos.Persistence(42)})
	assert.ErrorContains(t, err, "42")
}

// Close stops every node, which cannot start again; it is idempotent, and
// StartNodes then fails with the backend's Closed error.
func closeBackend(t *testing.T, b chaos.Backend, errs Errs) {
	t.Parallel()
	nodes := startNodes(t, b, 2, chaos.NodeSpec{Clock: true})
	require.NoError(t, b.Close())
	for _, n := range nodes {
		assert.Error(t, pingWithin(t, n.Addr(), time.Second), "Close stops %s", n.Name())
		assert.Error(t, n.Start(ctxOp(t)), "a closed node cannot start")
	}
	require.NoError(t, b.Close(), "Close is idempotent")
	_, err := b.StartNodes(ctxOp(t), 1, chaos.NodeSpec{})
	assert.ErrorIs(t, err, errs.Closed)
}
