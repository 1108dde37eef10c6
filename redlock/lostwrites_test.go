package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Fencing across lost writes on five nodes (docs/fencing.md, The proof): B
// acquires after A, and the nodes A's and B's majorities share forgot A's
// token in between. B's token must be above A's. Each case runs twice: with
// the clock floor, and with it off (counter-only tokens), which must show
// the repeated or lower token under the same steps.

type lostRig struct {
	t       *testing.T
	ctx     context.Context
	nodes   []*redisnode.Node
	clients []redis.UniversalClient
	key     string
	floor   bool
}

func newLostRig(t *testing.T, floor bool) *lostRig {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	nodes := redistest.Nodes(t, 5)
	return &lostRig{t: t, ctx: ctx, nodes: nodes, clients: redistest.Clients(t, nodes), key: redistest.Key(t), floor: floor}
}

// mutex returns a mutex over the nodes in reach; the others are addresses
// where nothing listens (that client is cut off from them).
func (r *lostRig) mutex(reach ...int) *redlock.Mutex {
	clients := make([]redis.UniversalClient, len(r.clients))
	for i := range clients {
		clients[i] = redistest.Client(r.t, fmt.Sprintf("127.0.0.1:%d", i+1)) // refused at once
	}
	for _, i := range reach {
		clients[i] = r.clients[i]
	}
	opts := []redlock.Option{redlock.WithFencing(), redlock.WithQuarantine(0), redlock.WithWakeup(false),
		redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(time.Second)}
	if !r.floor {
		opts = append(opts, redlock.WithoutClockFloor())
	}
	m, err := newClient(r.t, clients, opts...).NewMutex(r.key)
	require.NoError(r.t, err)
	return m
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

// Only node 2 is in both A's majority {0,1,2} and B's {2,3,4}; it restarts
// empty while A holds the lock. Without the quarantine B is granted the lock
// too (the documented unsafe case), but its token is above A's.
func TestFencingSharedNodeRestartedEmpty(t *testing.T) {
	for _, floor := range []bool{true, false} {
		r := newLostRig(t, floor)
		a := r.lock(r.mutex(0, 1, 2))
		r.restart(2)
		b := r.lock(r.mutex(2, 3, 4))
		assert.Nil(t, a.Err(), "A still holds: two holders at once without the quarantine")
		if floor {
			assert.Greater(t, b.Token(), a.Token(), "B's token")
		} else {
			assert.Equal(t, a.Token(), b.Token(), "control: counter-only tokens repeat")
		}
	}
}

// Every node restarts empty between A and B.
func TestFencingAllNodesRestartedEmpty(t *testing.T) {
	for _, floor := range []bool{true, false} {
		r := newLostRig(t, floor)
		m := r.mutex(0, 1, 2, 3, 4)
		var a fencing.Token
		for range 3 {
			l := r.lock(m)
			require.Greater(t, l.Token(), a)
			a = l.Token()
			require.NoError(t, l.Release(r.ctx))
		}
		r.restart(0, 1, 2, 3, 4)
		b := r.lock(m)
		if floor {
			assert.Greater(t, b.Token(), a, "B's token after every node restarted empty")
		} else {
			assert.Equal(t, fencing.Token(1), b.Token(), "control: counter-only tokens start again at 1")
		}
	}
}

// The fence hash on the shared node is deleted, or expires, between A's
// release and B's acquisition.
func TestFencingSharedFenceKeyLost(t *testing.T) {
	for _, how := range []string{"deleted", "expired"} {
		for _, floor := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/floor=%v", how, floor), func(t *testing.T) {
				r := newLostRig(t, floor)
				a := r.lock(r.mutex(0, 1, 2))
				require.NoError(t, a.Release(r.ctx))
				fk, c := core.FenceKey(r.key), r.clients[2]
				if how == "deleted" {
					require.NoError(t, c.Del(r.ctx, fk).Err())
				} else {
					require.NoError(t, c.PExpire(r.ctx, fk, time.Millisecond).Err())
					require.Eventually(t, func() bool {
						n, err := c.Exists(r.ctx, fk).Result()
						return err == nil && n == 0
					}, 5*time.Second, 5*time.Millisecond)
				}
				b := r.lock(r.mutex(2, 3, 4))
				if floor {
					assert.Greater(t, b.Token(), a.Token())
				} else {
					assert.Equal(t, a.Token(), b.Token(), "control: counter-only tokens repeat")
				}
			})
		}
	}
}

// Each fence write sets the retention as the fence hash's TTL, on every
// node that acknowledged.
func TestFenceRetention(t *testing.T) {
	r := newLostRig(t, true)
	m, err := newClient(t, r.clients, redlock.WithFencing(), redlock.WithFenceRetention(10*time.Minute)).NewMutex(r.key)
	require.NoError(t, err)
	l := r.lock(m)
	require.NoError(t, l.Release(r.ctx))
	acked := 0
	for _, c := range r.clients {
		ttl, err := c.PTTL(r.ctx, core.FenceKey(r.key)).Result()
		require.NoError(t, err)
		if ttl > 0 {
			acked++
			assert.InDelta(t, (10 * time.Minute).Seconds(), ttl.Seconds(), 5)
		}
	}
	assert.GreaterOrEqual(t, acked, 3, "a majority holds the fence hash, with the retention as TTL")
	_, err = redlock.New(r.clients, redlock.WithFenceRetention(time.Second))
	var ce *redlock.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "fence retention")
}

// Upgrading from counter-only tokens: counters left by an earlier version on
// every node are followed by a token above them.
func TestFencingUpgradeFromCounters(t *testing.T) {
	r := newLostRig(t, true)
	for i, c := range r.clients {
		require.NoError(t, c.HSet(r.ctx, core.FenceKey(r.key), "t", 40+i, "owner", "an-old-lease").Err())
	}
	l := r.lock(r.mutex(0, 1, 2, 3, 4))
	assert.Greater(t, l.Token(), fencing.Token(time.Now().Add(-time.Minute).UnixMicro()), "a clock-sized token, above every old counter")
	require.NoError(t, l.Release(r.ctx))
}
