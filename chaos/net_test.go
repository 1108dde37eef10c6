package chaos_test

import (
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/internal/redistest"
)

// netSetup starts nodes and a Network for clients over them, both closed
// with the test, and one go-redis client per link: cl[c][n] dials
// nw.Addr(c, n).
func netSetup(t *testing.T, nodes, clients int) ([]chaos.Node, *chaos.Network, [][]*redis.Client) {
	t.Helper()
	ns := procNodes(t, nodes, chaos.NodeSpec{})
	nw, err := chaos.NewNetwork(ns, clients)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, nw.Close()) })
	cl := make([][]*redis.Client, clients)
	for c := range clients {
		for n := range nodes {
			cl[c] = append(cl[c], redistest.Client(t, nw.Addr(c, n)))
		}
	}
	return ns, nw, cl
}

// reachable asserts that c answers PING, and fails the test otherwise.
func reachable(t *testing.T, c *redis.Client, msg string) {
	t.Helper()
	require.NoError(t, pingWithin(t, c, 2*time.Second), msg)
}

// healed heals the link from client c to node n and asserts that the
// client reaches the node again through it.
func healed(t *testing.T, nw *chaos.Network, cl [][]*redis.Client, c, n int) {
	t.Helper()
	require.NoError(t, nw.Heal(c, n))
	reachable(t, cl[c][n], "healed")
}

// refused asserts that a PING through c fails fast (an error that is not a
// timeout, well within a generous deadline).
func refused(t *testing.T, c *redis.Client, msg string) {
	t.Helper()
	err := pingWithin(t, c, 2*time.Second)
	require.Error(t, err, msg)
	assert.False(t, isTimeout(err), "%s: want a fast failure, got a timeout: %v", msg, err)
}

// assertRefusesSoon asserts that connecting to addr is refused within a
// bounded time: a just-closed listener can linger while this process forks
// a child, until the child execs.
func assertRefusesSoon(t *testing.T, addr, msg string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if !time.Now().Before(deadline) {
			assert.ErrorIs(t, err, syscall.ECONNREFUSED, msg)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNetworkProxiesTraffic(t *testing.T) {
	t.Parallel()
	nodes, nw, cl := netSetup(t, 2, 2)
	ctx := procCtx(t, 10*time.Second)
	assert.Equal(t, 2, nw.Clients())
	assert.Equal(t, 2, nw.Nodes())

	addrs := map[string]bool{}
	for c := range 2 {
		assert.Equal(t, []string{nw.Addr(c, 0), nw.Addr(c, 1)}, nw.Addrs(c))
		for n := range 2 {
			addr := nw.Addr(c, n)
			assert.NotEqual(t, nodes[n].Addr(), addr, "clients dial the proxy")
			assert.False(t, addrs[addr], "one proxy per link")
			addrs[addr] = true
			require.NoError(t, cl[c][n].Set(ctx, "via", addr, 0).Err())
			// The write landed on node n.
			direct := redistest.Client(t, nodes[n].Addr())
			assert.Equal(t, addr, direct.Get(ctx, "via").Val())
		}
	}
	assert.Empty(t, nw.Addr(2, 0))
	assert.Empty(t, nw.Addr(0, -1))
	assert.Nil(t, nw.Addrs(5))
	_, err := chaos.NetworkLink(nw, 0, 2)
	assert.Error(t, err)
	l, err := chaos.NetworkLink(nw, 1, 0)
	require.NoError(t, err)
	assert.Equal(t, "c1-n0", l.Name())
	assert.Equal(t, nodes[0].Addr(), l.Upstream())
}

func TestNetworkCutAndHeal(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 2, 2)
	for c := range 2 {
		for n := range 2 {
			reachable(t, cl[c][n], "before the cut")
		}
	}
	addr := nw.Addr(0, 1)
	require.NoError(t, nw.Cut(0, 1))
	require.NoError(t, nw.Cut(0, 1), "cutting twice is fine")
	refused(t, cl[0][1], "a cut link fails fast")
	assertRefusesSoon(t, addr, "new connections are refused")
	reachable(t, cl[0][0], "client 0 still reaches node 0")
	reachable(t, cl[1][1], "client 1 still reaches node 1")

	require.NoError(t, nw.Heal(0, 1))
	assert.Equal(t, addr, nw.Addr(0, 1), "the address survives the cut")
	reachable(t, cl[0][1], "healed")
}

func TestNetworkBlackhole(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 1, 2)
	reachable(t, cl[0][0], "before the blackhole")
	require.NoError(t, nw.Blackhole(0, 0))

	// An open connection goes silent and a new one is accepted but silent.
	err := pingWithin(t, cl[0][0], 200*time.Millisecond)
	require.Error(t, err)
	assert.True(t, isTimeout(err), "a blackhole hangs rather than refuses: %v", err)
	conn, err := net.DialTimeout("tcp", nw.Addr(0, 0), 2*time.Second)
	require.NoError(t, err, "a blackhole accepts connections")
	require.NoError(t, conn.Close())
	err = pingWithin(t, cl[0][0], 200*time.Millisecond)
	require.Error(t, err)
	assert.True(t, isTimeout(err), "a new connection hangs too: %v", err)
	reachable(t, cl[1][0], "other clients are unaffected")

	healed(t, nw, cl, 0, 0)
}

func TestNetworkLatency(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 1, 1)
	reachable(t, cl[0][0], "an open connection before the delay")
	const delay = 150 * time.Millisecond
	require.NoError(t, nw.Latency(0, 0, delay))

	measure := func() time.Duration {
		start := time.Now()
		require.NoError(t, pingWithin(t, cl[0][0], 5*time.Second))
		return time.Since(start)
	}
	assert.GreaterOrEqual(t, measure(), delay, "each round trip takes at least the delay")
	require.NoError(t, nw.Latency(0, 0, 2*delay), "replacing the delay")
	assert.GreaterOrEqual(t, measure(), 2*delay)
	assert.Error(t, nw.Latency(0, 0, -time.Second))
	assert.Error(t, nw.Latency(0, 0, 2*time.Hour))

	healed(t, nw, cl, 0, 0)
	require.NoError(t, nw.Latency(0, 0, delay))
	require.NoError(t, nw.Latency(0, 0, 0), "zero removes the delay")
	reachable(t, cl[0][0], "no delay")
}

func TestNetworkReset(t *testing.T) {
	t.Parallel()
	nodes, nw, cl := netSetup(t, 1, 1)
	ctx := procCtx(t, 10*time.Second)
	reachable(t, cl[0][0], "an open connection before the reset")
	require.NoError(t, nw.Reset(0, 0))

	err := cl[0][0].Set(ctx, "k", "v", 0).Err()
	require.Error(t, err, "the reply is replaced by a reset")
	assert.False(t, isTimeout(err), "a reset is not a timeout: %v", err)
	direct := redistest.Client(t, nodes[0].Addr())
	assert.Equal(t, "v", direct.Get(ctx, "k").Val(), "yet the command ran on the node")
	refused(t, cl[0][0], "new connections are reset too")

	healed(t, nw, cl, 0, 0)
}

func TestNetworkPartition(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 3, 2)

	// Client 0 reaches only node 0; client 1 is unaffected.
	require.NoError(t, nw.Partition(0, 0))
	reachable(t, cl[0][0], "client 0 keeps node 0")
	refused(t, cl[0][1], "client 0 is cut from node 1")
	refused(t, cl[0][2], "client 0 is cut from node 2")
	for n := range 3 {
		reachable(t, cl[1][n], "client 1 still reaches every node")
	}

	// Re-partitioning heals what becomes reachable.
	require.NoError(t, nw.Partition(0, 1, 2))
	refused(t, cl[0][0], "client 0 is now cut from node 0")
	reachable(t, cl[0][1], "client 0 reaches node 1 again")
	reachable(t, cl[0][2], "client 0 reaches node 2 again")

	require.NoError(t, nw.Isolate(1))
	for n := range 3 {
		refused(t, cl[1][n], "client 1 is isolated")
	}
	reachable(t, cl[0][1], "isolating client 1 leaves client 0 alone")

	require.NoError(t, nw.HealAll())
	for c := range 2 {
		for n := range 3 {
			reachable(t, cl[c][n], "healed")
		}
	}

	assert.Error(t, nw.Partition(2, 0), "client out of range")
	assert.Error(t, nw.Partition(0, 3), "node out of range")
	assert.Error(t, nw.Isolate(-1))
	assert.Error(t, nw.Cut(0, 3))
	assert.Error(t, nw.Heal(-1, 0))
}

func TestNetworkRetarget(t *testing.T) {
	t.Parallel()
	nodes, nw, cl := netSetup(t, 2, 1)
	ctx := procCtx(t, 10*time.Second)
	require.NoError(t, cl[0][0].Set(ctx, "who", "n0", 0).Err())
	require.NoError(t, cl[0][1].Set(ctx, "who", "n1", 0).Err())

	addr := nw.Addr(0, 0)
	require.NoError(t, nw.Retarget(0, 0, nodes[1].Addr()))
	assert.Equal(t, addr, nw.Addr(0, 0), "the client's address does not move")
	// Retarget closed the old client's pooled connection, so dial afresh.
	fresh := redistest.Client(t, addr)
	got, err := fresh.Get(ctx, "who").Result()
	require.NoError(t, err)
	assert.Equal(t, "n1", got, "it now reaches node 1")
	l, err := chaos.NetworkLink(nw, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, nodes[1].Addr(), l.Upstream())

	// A cut link stays cut when retargeted.
	require.NoError(t, nw.Cut(0, 0))
	require.NoError(t, nw.Retarget(0, 0, nodes[0].Addr()))
	refused(t, cl[0][0], "still cut")
	require.NoError(t, nw.Heal(0, 0))
	got, err = cl[0][0].Get(ctx, "who").Result()
	require.NoError(t, err)
	assert.Equal(t, "n0", got, "back on node 0")

	assert.Error(t, nw.Retarget(0, 0, "not-an-address"))
}

func TestNetworkAddLink(t *testing.T) {
	t.Parallel()
	nodes, nw, _ := netSetup(t, 1, 1)
	l, err := nw.AddLink("replication", nodes[0].Addr())
	require.NoError(t, err)
	assert.Equal(t, "replication", l.Name())
	c := redistest.Client(t, l.Addr())
	reachable(t, c, "an extra link forwards")

	require.NoError(t, l.Blackhole())
	err = pingWithin(t, c, 200*time.Millisecond)
	require.Error(t, err)
	assert.True(t, isTimeout(err), "blackholed: %v", err)
	require.NoError(t, nw.HealAll(), "HealAll covers extra links")
	reachable(t, c, "healed")

	require.NoError(t, l.Cut())
	refused(t, c, "cut")
	require.NoError(t, l.Heal())
	reachable(t, c, "healed")

	_, err = nw.AddLink("replication", nodes[0].Addr())
	assert.Error(t, err, "duplicate name")
	_, err = nw.AddLink("", nodes[0].Addr())
	assert.Error(t, err, "empty name")
	_, err = nw.AddLink("bad", "nowhere")
	assert.Error(t, err, "invalid upstream")
}

func TestNetworkClose(t *testing.T) {
	t.Parallel()
	nodes := procNodes(t, 2, chaos.NodeSpec{})
	nw, err := chaos.NewNetwork(nodes, 2)
	require.NoError(t, err)
	extra, err := nw.AddLink("extra", nodes[0].Addr())
	require.NoError(t, err)

	// Leave faults and open connections behind: Close must still tear
	// everything down.
	cl := redistest.Client(t, nw.Addr(0, 0))
	reachable(t, cl, "open a connection")
	slow := redistest.Client(t, nw.Addr(1, 1))
	reachable(t, slow, "open a connection")
	require.NoError(t, nw.Blackhole(0, 0))
	require.NoError(t, nw.Latency(1, 1, 50*time.Millisecond))
	require.NoError(t, nw.Reset(1, 0))
	require.NoError(t, nw.Cut(0, 1))
	hung := pingWithin(t, cl, 100*time.Millisecond)
	require.Error(t, hung)

	addr := nw.Addr(1, 0)
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, nw.Close())
	require.NoError(t, nw.Close(), "Close is idempotent")
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(2*time.Second)))
	_, err = raw.Read(make([]byte, 1))
	require.Error(t, err)
	assert.False(t, isTimeout(err), "Close closes open connections: %v", err)
	assertRefusesSoon(t, addr, "proxies are gone")
	for _, f := range []func() error{
		func() error { return nw.Cut(0, 0) },
		func() error { return nw.Heal(0, 0) },
		func() error { return nw.HealAll() },
		extra.Blackhole,
		func() error { _, err := nw.AddLink("more", nodes[0].Addr()); return err },
	} {
		assert.ErrorIs(t, f(), chaos.ErrNetworkClosed)
	}
}

func TestNewNetworkInvalid(t *testing.T) {
	t.Parallel()
	nodes := procNodes(t, 1, chaos.NodeSpec{})
	for _, tc := range []struct {
		name    string
		nodes   []chaos.Node
		clients int
	}{
		{"no nodes", nil, 1},
		{"no clients", nodes, 0},
		{"nil node", []chaos.Node{nodes[0], nil}, 1},
	} {
		nw, err := chaos.NewNetwork(tc.nodes, tc.clients)
		assert.Error(t, err, tc.name)
		assert.Nil(t, nw, tc.name)
	}
}

// TestNetworkHealWhileForking cuts and heals a link over and over while
// the process keeps forking children, each of which briefly holds a copy
// of the proxy's listener: every Heal must still rebind the address.
func TestNetworkHealWhileForking(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 1, 1)
	bin, err := exec.LookPath("true")
	require.NoError(t, err)
	defer chaos.InBackground(4, func() { _ = exec.Command(bin).Run() })()
	for i := range 40 {
		require.NoError(t, nw.Cut(0, 0), "round %d", i)
		require.NoError(t, nw.Heal(0, 0), "round %d", i)
	}
	reachable(t, cl[0][0], "healed after all rounds")
}

// TestNetworkFaultsUnderTraffic switches faults on and off while clients
// keep sending requests through the link, which -race checks for data
// races in the proxy; the link must work again once healed.
func TestNetworkFaultsUnderTraffic(t *testing.T) {
	t.Parallel()
	_, nw, cl := netSetup(t, 1, 1)
	halt := chaos.InBackground(4, func() {
		_ = pingWithin(t, cl[0][0], 50*time.Millisecond) // errors are expected
	})
	defer halt()
	faults := []func() error{
		func() error { return nw.Latency(0, 0, 5*time.Millisecond) },
		func() error { return nw.Latency(0, 0, 10*time.Millisecond) },
		func() error { return nw.Blackhole(0, 0) },
		func() error { return nw.Reset(0, 0) },
		func() error { return nw.Cut(0, 0) },
		func() error { return nw.Latency(0, 0, 0) },
	}
	for round := range 10 {
		for i, f := range faults {
			if (round+i)%2 == 0 {
				require.NoError(t, f(), "round %d fault %d", round, i)
			}
		}
		time.Sleep(20 * time.Millisecond) // dwell so traffic hits the faults; not synchronisation
		require.NoError(t, nw.Heal(0, 0), "round %d", round)
	}
	halt()
	// A fresh client: after many refused dials go-redis's pool fails dials
	// fast from its own memory for up to a second (its dial circuit
	// breaker), which says nothing about the link.
	reachable(t, redistest.Client(t, nw.Addr(0, 0)), "healed")
}
