package locktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Fencing across lost writes (docs/fencing.md, The guarantee and The proof):
// B acquires after A, and the nodes A's and B's majorities share forgot A's
// token in between. B's token must be above A's. Each case runs twice: with
// the clock floor (the library as shipped), and with it off (counter-only
// tokens, the behaviour before it), which must show the repeated or lower
// token under the same steps, so that the test can tell the difference. With
// one node (single) A's and B's majorities are that node.

// lostRig is k.Nodes fresh nodes without persistence and one key.
type lostRig struct {
	t       *testing.T
	k       Kind
	ctx     context.Context
	nodes   []*redisnode.Node
	clients []redis.UniversalClient
	key     string
	floor   bool
}

func (k Kind) newLostRig(t *testing.T, floor bool) *lostRig {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	nodes := redistest.Nodes(t, k.Nodes)
	return &lostRig{t: t, k: k, ctx: ctx, nodes: nodes, clients: redistest.Clients(t, nodes), key: redistest.Key(t), floor: floor}
}

// all, first and last are the indexes of every node, of A's majority and of
// B's; shared those of the nodes in both.
func (r *lostRig) all() []int    { return span(0, len(r.nodes)) }
func (r *lostRig) first() []int  { a, _, _ := majorities(len(r.nodes)); return a }
func (r *lostRig) last() []int   { _, b, _ := majorities(len(r.nodes)); return b }
func (r *lostRig) shared() []int { _, _, both := majorities(len(r.nodes)); return both }

// majorities returns the indexes of the first majority of n nodes (A's), of
// the last one (B's), and of the nodes in both: with five nodes {0,1,2},
// {2,3,4} and {2}; with one node, that node in each.
func majorities(n int) (a, b, both []int) {
	q := majority(n)
	return span(0, q), span(n-q, n), span(n-q, q)
}

// span returns from, from+1, ..., to-1.
func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// mutex returns a fenced mutex over the nodes in reach, with the quarantine
// off; the others are addresses where nothing listens (that client is cut
// off from them). Without the floor, tokens come from the counters alone.
func (r *lostRig) mutex(reach ...int) *redlock.Mutex {
	clients := make([]redis.UniversalClient, len(r.clients))
	for i := range clients {
		clients[i] = redistest.Client(r.t, fmt.Sprintf("127.0.0.1:%d", i+1)) // refused at once
	}
	for _, i := range reach {
		clients[i] = r.clients[i]
	}
	o := opts(withFencing, r.k.quarantineOff(), []redlock.Option{redlock.WithWakeup(false),
		redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(time.Second)})
	if !r.floor {
		o = append(o, r.k.withoutClockFloor(r.t))
	}
	return mutex(r.t, r.k.client(r.t, clients, o...), r.key)
}

func (r *lostRig) lock(m *redlock.Mutex) *redlock.Lease {
	l, err := m.TryLock(r.ctx)
	require.NoError(r.t, err)
	return l
}

func (r *lostRig) restart(nodes ...int) {
	for _, i := range nodes {
		require.NoError(r.t, r.nodes[i].Restart(r.ctx))
	}
}

// lostWrite runs the steps: A takes five tokens on ma, lose makes nodes
// forget them, B takes one on mb. It returns A's first and last token, and
// B's.
func (r *lostRig) lostWrite(ma, mb *redlock.Mutex, lose func()) (first, a, b fencing.Token) {
	r.t.Helper()
	for i := range 5 {
		l := r.lock(ma)
		require.Greater(r.t, l.Token(), a)
		a = l.Token()
		if i == 0 {
			first = a
		}
		require.NoError(r.t, l.Release(r.ctx))
	}
	lose()
	l, err := mb.TryLock(r.ctx)
	require.NoError(r.t, err, "B acquires after the loss")
	require.NoError(r.t, l.Release(r.ctx))
	return first, a, l.Token()
}

// floors runs f as subtests with the clock floor and without it.
func floors(t *testing.T, f func(t *testing.T, floor bool)) {
	for _, floor := range []bool{true, false} {
		t.Run(fmt.Sprintf("floor=%v", floor), func(t *testing.T) { f(t, floor) })
	}
}

// FencingSharedNodeRestartedEmpty restarts empty, while A holds the lock,
// the nodes in both A's majority and B's (with five nodes, node 2 of {0,1,2}
// and {2,3,4}). Without the quarantine B is granted the lock too (the documented
// unsafe case), but its token is above A's.
func FencingSharedNodeRestartedEmpty(t *testing.T, k Kind) {
	floors(t, func(t *testing.T, floor bool) {
		r := k.newLostRig(t, floor)
		a := r.lock(r.mutex(r.first()...))
		r.restart(r.shared()...)
		b := r.lock(r.mutex(r.last()...))
		assert.Nil(t, a.Err(), "A still holds: two holders at once without the quarantine")
		if floor {
			assert.Greater(t, b.Token(), a.Token(), "B's token")
		} else {
			assert.Equal(t, a.Token(), b.Token(), "control: counter-only tokens repeat")
		}
	})
}

// FencingAllNodesRestartedEmpty restarts every node empty (no persistence)
// between A and B.
func FencingAllNodesRestartedEmpty(t *testing.T, k Kind) {
	floors(t, func(t *testing.T, floor bool) {
		r := k.newLostRig(t, floor)
		m := r.mutex(r.all()...)
		_, a, b := r.lostWrite(m, m, func() {
			r.restart(r.all()...)
			for i, c := range r.clients {
				n, err := c.Exists(r.ctx, FenceKey(r.key)).Result()
				require.NoError(t, err)
				require.Zero(t, n, "node %d: the restart lost the fence hash", i)
			}
		})
		if floor {
			assert.Greater(t, b, a, "B's token after every node restarted empty")
		} else {
			assert.LessOrEqual(t, b, a, "control: counter-only tokens start again at 1")
			assert.Equal(t, fencing.Token(1), b)
		}
	})
}

// FencingSharedFenceKeyLost deletes, or lets expire, the fence hash on the
// nodes A's and B's majorities share, between A's release and B's
// acquisition.
func FencingSharedFenceKeyLost(t *testing.T, k Kind) {
	for _, how := range []string{"deleted", "expired"} {
		t.Run(how, func(t *testing.T) {
			floors(t, func(t *testing.T, floor bool) {
				r := k.newLostRig(t, floor)
				fk := FenceKey(r.key)
				first, a, b := r.lostWrite(r.mutex(r.first()...), r.mutex(r.last()...), func() {
					for _, i := range r.shared() {
						c := r.clients[i]
						if how == "deleted" {
							require.NoError(t, c.Del(r.ctx, fk).Err())
							continue
						}
						require.NoError(t, c.PExpire(r.ctx, fk, time.Millisecond).Err())
						require.Eventually(t, func() bool {
							n, err := c.Exists(r.ctx, fk).Result()
							return err == nil && n == 0
						}, 5*time.Second, 5*time.Millisecond, "node %d: the fence hash expired", i)
					}
				})
				if floor {
					assert.Greater(t, b, a)
				} else {
					assert.Equal(t, first, b, "control: counter-only tokens repeat")
					assert.Equal(t, fencing.Token(1), b, "control: counter-only tokens restart from 1")
					assert.Less(t, b, a)
				}
			})
		})
	}
}

// FenceRetention checks that each fence write sets the retention as the
// fence hash's TTL (unset: max(1h, 2 TTL)), on every node that acknowledged,
// and that the option is validated.
func FenceRetention(t *testing.T, k Kind) {
	r := k.newLostRig(t, true)
	for _, tc := range []struct {
		opts []redlock.Option
		want time.Duration
	}{
		{nil, time.Hour},
		{[]redlock.Option{redlock.WithFenceRetention(10 * time.Minute)}, 10 * time.Minute},
		{[]redlock.Option{redlock.WithTTL(time.Hour)}, 2 * time.Hour},
	} {
		key := r.key + tc.want.String()
		m := mutex(t, k.client(t, r.clients, opts(tc.opts, withFencing, k.quarantineOff())...), key)
		l := r.lock(m)
		require.NoError(t, l.Release(r.ctx))
		acked := 0
		for i, c := range r.clients {
			ttl, err := c.PTTL(r.ctx, FenceKey(key)).Result()
			require.NoError(t, err)
			if ttl > 0 {
				acked++
				assert.InDelta(t, tc.want.Seconds(), ttl.Seconds(), 5, "node %d: the fence hash expires after the retention", i)
			}
		}
		assert.GreaterOrEqual(t, acked, majority(k.Nodes), "a majority holds the fence hash, with the retention %v as TTL", tc.want)
	}
	for _, tc := range []struct {
		retention time.Duration
		more      []redlock.Option
	}{
		{time.Second, nil},
		{0, []redlock.Option{redlock.WithTTL(8 * time.Second)}},
		{-time.Second, []redlock.Option{redlock.WithTTL(8 * time.Second)}},
		{9 * time.Second, []redlock.Option{redlock.WithTTL(8 * time.Second)}},
		{15 * time.Second, []redlock.Option{redlock.WithTTL(8 * time.Second)}},
	} {
		c, err := k.New(r.clients, append([]redlock.Option{redlock.WithFenceRetention(tc.retention)}, tc.more...)...)
		if c != nil {
			_ = c.Close()
		}
		var ce *redlock.ConfigError
		require.ErrorAs(t, err, &ce, "retention %v", tc.retention)
		assert.Contains(t, err.Error(), "fence retention")
	}
}

// FencingUpgradeFromCounters upgrades from counter-only tokens: fence hashes
// left by an earlier version (small counters, no TTL) on every node are
// followed by a token above them, from the clock, and the hashes get the
// retention as TTL.
func FencingUpgradeFromCounters(t *testing.T, k Kind) {
	r := k.newLostRig(t, true)
	for i, c := range r.clients {
		require.NoError(t, c.HSet(r.ctx, FenceKey(r.key), "t", 40+i, "owner", "an-old-lease").Err())
	}
	before, _ := clockRange(r.ctx, t, r.clients)
	l := r.lock(r.mutex(r.all()...))
	assert.GreaterOrEqual(t, l.Token(), before, "the first token after the upgrade comes from the clock, above every old counter")
	assert.Greater(t, l.Token(), fencing.Token(time.Now().Add(-time.Minute).UnixMicro()), "a clock-sized token")
	require.NoError(t, l.Release(r.ctx))
	expiring := 0
	for _, c := range r.clients {
		ttl, err := c.PTTL(r.ctx, FenceKey(r.key)).Result()
		require.NoError(t, err)
		if ttl > 0 {
			expiring++
		}
	}
	assert.GreaterOrEqual(t, expiring, majority(k.Nodes), "the old hashes now expire (those the token was written to)")
}

// fenceCounter returns the counter of key's fence hash on c ("" when there
// is none).
func fenceCounter(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.HGet(context.Background(), FenceKey(key), "t").Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// FencingTokens checks the tokens of WithFencing on one mutex: they increase
// with every acquisition, are never below the nodes' clocks (the clock
// floor), survive Extend, are not consumed by a refused attempt, and are
// left on a majority by release, with the default retention as TTL. Another
// mutex of the same Client, without WithFencing, has no token and no fence
// key.
func FencingTokens(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.client(t, clients, redlock.WithTTL(5*time.Second))
	key := redistest.Key(t)
	m := mutex(t, c, key, redlock.WithFencing())
	var last fencing.Token
	for i := 0; i < 10; i++ {
		before, _ := clockRange(ctx, t, clients)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		_, after := clockRange(ctx, t, clients)
		assert.Greater(t, l.Token(), last, "tokens increase with every acquisition")
		// The clock floor: max(counter + 1, the nodes' clocks), and the
		// counter does not run ahead of the clock here.
		assert.GreaterOrEqual(t, l.Token(), before, "the token is not below the nodes' clocks")
		assert.LessOrEqual(t, l.Token(), after)
		last = l.Token()
		require.NoError(t, l.Extend(ctx))
		assert.Equal(t, last, l.Token(), "Extend keeps the token")
		require.NoError(t, l.Release(ctx))
	}
	// A refused attempt does not consume a token.
	holder, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrTaken)
	require.NoError(t, holder.Release(ctx))
	next, err := m.TryLock(ctx)
	require.NoError(t, err)
	assert.Greater(t, next.Token(), holder.Token())
	require.NoError(t, next.Release(ctx))

	acked := 0
	for i, cl := range clients {
		if fenceCounter(t, cl, key) != next.Token().String() {
			continue
		}
		acked++
		ttl, err := cl.PTTL(ctx, FenceKey(key)).Result()
		require.NoError(t, err)
		assert.InDelta(t, time.Hour.Seconds(), ttl.Seconds(), 5, "node %d: the counter expires after the default retention", i)
	}
	assert.GreaterOrEqual(t, acked, majority(k.Nodes), "release left the counters of a majority at the last token: it never touches them")

	// Fencing off, per mutex: no token and no fence key.
	plainKey := redistest.Key(t)
	plain := mutex(t, c, plainKey)
	l, err := plain.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, fencing.Token(0), l.Token())
	require.NoError(t, l.Release(ctx))
	for i, cl := range clients {
		n, err := cl.Exists(ctx, FenceKey(plainKey)).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "node %d: no fence key without fencing", i)
	}
}
