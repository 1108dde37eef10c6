package single_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/single"
)

// Fencing across lost writes (docs/fencing.md, The guarantee): B acquires
// after A returned, on a Redis that forgot A's counter in between; B's token
// must be above A's. Each case runs the same steps twice: with the clock
// floor (the library as shipped), and with it off (counter-only tokens, the
// behaviour before it), which must show the repeated or lower token, so that
// the test can tell the difference.

// lostWrite runs steps: A takes five tokens, lose makes the node forget
// them, B takes one. It returns A's last token and B's.
func lostWrite(t *testing.T, client redis.UniversalClient, lose func(ctx context.Context, key string), opts ...single.Option) (a, b fencing.Token) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	key := redistest.Key(t)
	c := newClient(t, client, append([]single.Option{single.WithFencing(), single.WithNodeTimeout(time.Second)}, opts...)...)
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	for range 5 {
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.Greater(t, l.Token(), a)
		a = l.Token()
		require.NoError(t, l.Release(ctx))
	}
	lose(ctx, key)
	l, err := m.TryLock(ctx)
	require.NoError(t, err, "B acquires after the loss")
	require.NoError(t, l.Release(ctx))
	return a, l.Token()
}

func TestFencingSurvivesRestartWithoutPersistence(t *testing.T) {
	for _, floor := range []bool{true, false} {
		node := redistest.Nodes(t, 1)[0]
		client := redistest.Client(t, node.Addr())
		var opts []single.Option
		if !floor {
			opts = append(opts, single.WithoutClockFloor())
		}
		a, b := lostWrite(t, client, func(ctx context.Context, key string) {
			require.NoError(t, node.Restart(ctx))
			n, err := client.Exists(ctx, core.FenceKey(key)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "the restart lost the fence hash")
		}, opts...)
		if floor {
			assert.Greater(t, b, a, "B's token after the restart")
		} else {
			assert.LessOrEqual(t, b, a, "control: counter-only tokens restart from 1")
			assert.Equal(t, fencing.Token(1), b)
		}
	}
}

func TestFencingSurvivesDeletedOrExpiredFenceKey(t *testing.T) {
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	del := func(ctx context.Context, key string) {
		require.NoError(t, client.Del(ctx, core.FenceKey(key)).Err())
	}
	expire := func(ctx context.Context, key string) {
		require.NoError(t, client.PExpire(ctx, core.FenceKey(key), time.Millisecond).Err())
		require.Eventually(t, func() bool {
			n, err := client.Exists(ctx, core.FenceKey(key)).Result()
			return err == nil && n == 0
		}, 5*time.Second, 5*time.Millisecond, "the fence hash expired")
	}
	for name, lose := range map[string]func(context.Context, string){"deleted": del, "expired": expire} {
		t.Run(name, func(t *testing.T) {
			a, b := lostWrite(t, client, lose)
			assert.Greater(t, b, a)
			a, b = lostWrite(t, client, lose, single.WithoutClockFloor())
			assert.Equal(t, fencing.Token(1), b, "control: counter-only tokens restart from 1")
			assert.Less(t, b, a)
		})
	}
}

// A primary and a replica; the replica is cut off (stopped, its link closed)
// before A acquires, so it never sees A's key or counter; the primary dies
// and the replica is promoted. B acquires on it while A's lease is valid:
// the lock is granted twice (single is only as safe as its Redis's
// durability), but B's token is above A's, so A's late write is rejected.
func TestFencingSurvivesFailoverToStaleReplica(t *testing.T) {
	for _, floor := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		nodes := redistest.Nodes(t, 2, func(o *redisnode.Options) {
			o.Args = append(o.Args, "--repl-diskless-sync-delay", "0")
		})
		primary, replica := nodes[0], nodes[1]
		pc, rc := redistest.Client(t, primary.Addr()), redistest.Client(t, replica.Addr())
		host, port, err := net.SplitHostPort(primary.Addr())
		require.NoError(t, err)
		require.NoError(t, rc.Do(ctx, "REPLICAOF", host, port).Err())
		require.Eventually(t, func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 20*time.Second, 20*time.Millisecond, "the replica's link came up")

		opts := []single.Option{single.WithFencing(), single.WithTTL(30 * time.Second), single.WithNodeTimeout(time.Second)}
		if !floor {
			opts = append(opts, single.WithoutClockFloor())
		}
		key := redistest.Key(t)
		ma, err := newClient(t, pc, opts...).NewMutex(key)
		require.NoError(t, err)
		mb, err := newClient(t, rc, opts...).NewMutex(key)
		require.NoError(t, err)

		// Two acquisitions the replica receives, then one it does not.
		for range 2 {
			l, err := ma.TryLock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
		}
		acked, err := pc.Do(ctx, "WAIT", 1, 5000).Int()
		require.NoError(t, err)
		require.Equal(t, 1, acked, "the replica has the first two tokens")
		require.NoError(t, replica.Pause())
		require.NoError(t, pc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
		la, err := ma.TryLock(ctx)
		require.NoError(t, err)

		require.NoError(t, primary.Kill())
		require.NoError(t, replica.Resume())
		require.NoError(t, rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())

		lb, err := mb.TryLock(ctx)
		require.NoError(t, err, "B acquires on the promoted replica")
		assert.Nil(t, la.Err(), "A's lease has not ended: two holders at once")
		assert.True(t, time.Now().Before(la.ValidUntil()))

		guard := fencing.NewMemoryGuard()
		require.NoError(t, guard.Check(ctx, "resource", fencing.Token(lb.Token())))
		late := guard.Check(ctx, "resource", fencing.Token(la.Token()))
		if floor {
			assert.Greater(t, lb.Token(), la.Token(), "B's token on the promoted replica")
			assert.ErrorIs(t, late, fencing.ErrStaleToken, "A's late write is rejected")
		} else {
			assert.Equal(t, la.Token(), lb.Token(), "control: the replica missed the counter's last increment")
			assert.NoError(t, late, "control: A's late write is accepted")
		}
		require.NoError(t, lb.Release(ctx))
		cancel()
	}
}

// The fence hash carries the retention as its TTL, refreshed by every
// acquisition; the option is validated.
func TestFenceRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	for _, tc := range []struct {
		opts []single.Option
		want time.Duration
	}{
		{nil, time.Hour},
		{[]single.Option{single.WithFenceRetention(10 * time.Minute)}, 10 * time.Minute},
		{[]single.Option{single.WithTTL(time.Hour)}, 2 * time.Hour},
	} {
		key := redistest.Key(t) + tc.want.String()
		m, err := newClient(t, client, append(tc.opts, single.WithFencing())...).NewMutex(key)
		require.NoError(t, err)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		ttl, err := client.PTTL(ctx, core.FenceKey(key)).Result()
		require.NoError(t, err)
		assert.InDelta(t, tc.want.Seconds(), ttl.Seconds(), 5, "the fence hash expires after the retention")
	}
	for _, d := range []time.Duration{0, -time.Second, 9 * time.Second, 15 * time.Second} {
		_, err := single.New(client, single.WithFenceRetention(d), single.WithTTL(8*time.Second))
		var ce *single.ConfigError
		require.ErrorAs(t, err, &ce, "retention %v", d)
		assert.Contains(t, err.Error(), "fence retention")
	}
}

// Upgrading from counter-only tokens: a fence hash left by an earlier version
// (a small counter, no TTL) is followed by a token above it, from the clock,
// and the hash gets the retention as TTL.
func TestFencingUpgradeFromCounters(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	key := redistest.Key(t)
	require.NoError(t, client.HSet(ctx, core.FenceKey(key), "t", 41, "owner", "an-old-lease").Err())
	m, err := newClient(t, client, single.WithFencing()).NewMutex(key)
	require.NoError(t, err)
	before := nodeMicros(ctx, t, client)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, l.Token(), before, "the first token after the upgrade comes from the clock, above the old counter")
	require.NoError(t, l.Release(ctx))
	ttl, err := client.PTTL(ctx, core.FenceKey(key)).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the old hash now expires")
}
