package redlock_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Fencing across lost writes (docs/fencing.md, The guarantee), in
// internal/locktest/lostwrites.go: B acquires after A returned, on a Redis
// that forgot A's counter in between; B's token must be above A's. Each case
// runs the same steps twice: with the clock floor (the library as shipped),
// and with it off (counter-only tokens, the behaviour before it), which must
// show the repeated or lower token, so that the test can tell the difference.

// The node restarts without persistence between A and B.
func TestSingleFencingSurvivesRestartWithoutPersistence(t *testing.T) {
	locktest.FencingAllNodesRestartedEmpty(t, singleKind)
}

// The node restarts without persistence while A holds the lock: B is granted
// it too (single is only as safe as its Redis's durability), with a token
// above A's.
func TestSingleFencingSharedNodeRestartedEmpty(t *testing.T) {
	locktest.FencingSharedNodeRestartedEmpty(t, singleKind)
}

// The fence hash is deleted, or expires, between A's release and B's
// acquisition.
func TestSingleFencingSurvivesDeletedOrExpiredFenceKey(t *testing.T) {
	locktest.FencingSharedFenceKeyLost(t, singleKind)
}

// A primary and a replica; the replica is cut off (stopped, its link closed)
// before A acquires, so it never sees A's key or counter; the primary dies
// and the replica is promoted. B acquires on it while A's lease is valid:
// the lock is granted twice (single is only as safe as its Redis's
// durability), but B's token is above A's, so A's late write is rejected.
func TestSingleFencingSurvivesFailoverToStaleReplica(t *testing.T) {
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

		opts := []redlock.Option{redlock.WithFencing(), redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(time.Second)}
		if !floor {
			opts = append(opts, redlock.WithoutClockFloor())
		}
		key := redistest.Key(t)
		ma, err := newSingleClient(t, pc, opts...).NewMutex(key)
		require.NoError(t, err)
		mb, err := newSingleClient(t, rc, opts...).NewMutex(key)
		require.NoError(t, err)

		// Two acquisitions the replica receives, then one it does not.
		la := leaseReplicaMisses(ctx, t, ma, pc, replica)

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
func TestSingleFenceRetention(t *testing.T) { locktest.FenceRetention(t, singleKind) }

// Upgrading from counter-only tokens: a fence hash left by an earlier version
// (a small counter, no TTL) is followed by a token above it, from the clock,
// and the hash gets the retention as TTL.
func TestSingleFencingUpgradeFromCounters(t *testing.T) {
	locktest.FencingUpgradeFromCounters(t, singleKind)
}
