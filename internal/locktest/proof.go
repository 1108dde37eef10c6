package locktest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// RestartProof runs the tests of the restart quarantine's proof per
// connection (docs/design.md, Restart quarantine): once a full check passed
// on a connection, acquires there skip it, and each of the faults a live
// connection does not show by itself is still caught before the node votes.
func RestartProof(t *testing.T, k Kind) {
	t.Run("ProvenConnectionSkipsTheCheck", func(t *testing.T) { provenSkipsCheck(t, k) })
	t.Run("FlushOnProvenConnection", func(t *testing.T) {
		provenFault(t, k, false, func(ctx context.Context, t *testing.T, n *redisnode.Node) {
			require.NoError(t, redistest.Client(t, n.Addr()).FlushAll(ctx).Err())
		})
	})
	t.Run("FlushOnProvenConnectionMarkerMadeAgain", func(t *testing.T) {
		provenFault(t, k, false, func(ctx context.Context, t *testing.T, n *redisnode.Node) {
			require.NoError(t, redistest.Client(t, n.Addr()).FlushAll(ctx).Err())
			// Another client's full check finds the marker missing and
			// makes a new one (with a new id), in quarantine.
			clients := make([]redis.UniversalClient, k.Nodes)
			for i, a := range DeadAddrs(t, k.Nodes) {
				clients[i] = redistest.Client(t, a)
			}
			clients[0] = redistest.Client(t, n.Addr())
			_, err := mutex(t, k.unvouched(t, clients, proofOptions()...), redistest.Key(t)).TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrQuarantined, "the other client's check quarantines the node")
		})
	})
	restart := func(ctx context.Context, t *testing.T, n *redisnode.Node) {
		require.NoError(t, n.Kill())
		require.NoError(t, n.Restart(ctx))
	}
	t.Run("RestartFromSnapshot", func(t *testing.T) { provenFault(t, k, false, restart) })
	t.Run("RestartFromSnapshotBehindProxy", func(t *testing.T) { provenFault(t, k, true, restart) })
}

// proofOptions turn the quarantine on (3s, so that a restarted node is
// still in it when B asks) with a TTL below it.
func proofOptions() []redlock.Option {
	return []redlock.Option{redlock.WithQuarantine(3 * time.Second), redlock.WithTTL(2 * time.Second),
		redlock.WithNodeTimeout(100 * time.Millisecond)}
}

// commandCalls returns how many times each of names ran on the node c
// reaches (INFO commandstats).
func commandCalls(ctx context.Context, t *testing.T, c redis.UniversalClient, names ...string) map[string]int {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int{}
	for _, name := range names {
		for _, line := range strings.Split(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			out[name] = n
		}
	}
	return out
}

// untilProven locks and releases with m until one cycle sends the proven
// form to each of the nodes clients reach at idx: a bare SET and a script
// only for the release. A connection is proven once a second has passed
// since the node's LASTSAVE (its start, here).
func untilProven(ctx context.Context, t *testing.T, m *redlock.Mutex, clients []redis.UniversalClient, idx []int) {
	t.Helper()
	require.Eventually(t, func() bool {
		before := make([]map[string]int, len(clients))
		for _, i := range idx {
			before[i] = commandCalls(ctx, t, clients[i], "evalsha", "set")
		}
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		for _, i := range idx {
			after := commandCalls(ctx, t, clients[i], "evalsha", "set")
			if after["set"]-before[i]["set"] != 1 || after["evalsha"]-before[i]["evalsha"] != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the connections become proven")
}

// provenSkipsCheck: once a Client's connections are proven, its acquires
// are a bare SET with the proof's two readings: over ten lock+release
// cycles every node runs ten SETs, ten LASTSAVEs, ten HGETs of the marker
// and ten scripts (the releases) only, and no TIME (the full form's).
func provenSkipsCheck(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.client(t, clients, proofOptions()...)
	m := mutex(t, c, redistest.Key(t))
	cycle := func() {
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	untilProven(ctx, t, m, clients, span(0, k.Nodes))
	names := []string{"evalsha", "set", "lastsave", "hget", "time"}
	before := make([]map[string]int, len(clients))
	for i, cl := range clients {
		before[i] = commandCalls(ctx, t, cl, names...)
	}
	const cycles = 10
	for range cycles {
		cycle()
	}
	landed(t, func() bool { // Release returns at a quorum; its last deletes land a moment later
		for i, cl := range clients {
			if commandCalls(ctx, t, cl, "evalsha")["evalsha"]-before[i]["evalsha"] < cycles {
				return false
			}
		}
		return true
	}, "every release reached every node")
	for i, cl := range clients {
		after := commandCalls(ctx, t, cl, names...)
		for _, name := range names[:4] {
			assert.Equal(t, cycles, after[name]-before[i][name], "node %d: %s calls over %d cycles", i, name, cycles)
		}
		assert.Zero(t, after["time"]-before[i]["time"], "node %d: no full check", i)
	}
}

// provenFault: the nodes both majorities share save a snapshot (with the
// marker); B's connections to every node it reaches are then proven (B
// locks another key); A takes its majority; the shared nodes meet fault (a
// flush, or a restart from the snapshot, which brings the marker back with
// its id but not A's key), with B's connections to them through a proxy
// that keeps them open across the restart when behindProxy is set. B, which
// reaches only its majority, must be refused, naming the quarantine, while
// A's lease is valid.
func provenFault(t *testing.T, k Kind, behindProxy bool, fault func(context.Context, *testing.T, *redisnode.Node)) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, k.Nodes)
	first, last, shared := majorities(k.Nodes)
	require.NoError(t, k.unvouched(t, redistest.Clients(t, nodes), proofOptions()...).Vouch(ctx), "brand-new nodes: the operator vouches")
	// The proxies listen before the dead addresses are picked: a port
	// DeadAddrs picked and closed could otherwise be a proxy's too.
	proxied := map[int]string{}
	if behindProxy {
		for _, i := range last {
			proxied[i] = redistest.ReconnectingProxy(t, nodes[i].Addr())
		}
	}
	dead := DeadAddrs(t, k.Nodes)
	a := k.unvouched(t, view(t, nodes, dead, first...), proofOptions()...)
	bClients := view(t, nodes, dead, last...)
	for i, addr := range proxied {
		bClients[i] = redistest.Client(t, addr)
	}
	b := k.unvouched(t, bClients, proofOptions()...)
	key := redistest.Key(t)

	direct := redistest.Clients(t, nodes)
	// Start at the top of a second of the nodes' clock: the snapshot, and
	// without the proof's wait for the next second (the mutation that drops
	// it) the restart too, then fall in one second of LASTSAVE.
	require.Eventually(t, func() bool {
		now, err := direct[shared[0]].Time(ctx).Result()
		return err == nil && now.Nanosecond() < 200*int(time.Millisecond)
	}, 3*time.Second, 5*time.Millisecond)
	for _, i := range shared {
		require.NoError(t, direct[i].Save(ctx).Err(), "a snapshot with the marker, before A's lock")
	}
	// Another Client over B's Redis clients for the nodes B reaches (and
	// live ones for the rest) proves their connections, which every Client
	// over those Redis clients shares, without dialing B's dead addresses
	// at every try.
	warm := make([]redis.UniversalClient, k.Nodes)
	for i := range warm {
		warm[i] = redistest.Client(t, nodes[i].Addr())
	}
	for _, i := range last {
		warm[i] = bClients[i]
	}
	untilProven(ctx, t, mutex(t, k.unvouched(t, warm, proofOptions()...), key+":warm"), direct, last)
	la, err := mutex(t, a, key).TryLock(ctx)
	require.NoError(t, err)
	for _, i := range shared {
		fault(ctx, t, nodes[i])
	}
	lb, err := mutex(t, b, key).TryLock(ctx)
	if err == nil {
		_ = lb.Release(ctx)
	}
	require.True(t, time.Now().Before(la.ValidUntil()), "the test ran within A's validity")
	require.Error(t, err, "B must not acquire while A's lease is valid")
	assert.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrQuarantined, "the shared nodes sit out")
	_ = la.Release(ctx) // its key is gone from the shared nodes
}
