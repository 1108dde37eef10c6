package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// keyOnEachPrimary returns, for every primary of the cluster, a key (with
// prefix) whose slot that primary owns, as the cluster itself reports it.
// None of the keys shares a slot with the quarantine marker key, so that a
// fenced acquire that sent the marker along would be refused with CROSSSLOT.
func keyOnEachPrimary(t *testing.T, cc *redis.ClusterClient, prefix string) map[string]string {
	t.Helper()
	ctx := t.Context()
	markerSlot, err := cc.ClusterKeySlot(ctx, redlock.MarkerKey).Result()
	require.NoError(t, err)
	keys := map[string]string{}
	for i := 0; len(keys) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("%s-%d", redistest.Key(t), i)
		slot, err := cc.ClusterKeySlot(ctx, prefix+key).Result()
		require.NoError(t, err)
		if slot == markerSlot {
			continue
		}
		owner, err := cc.MasterForKey(ctx, prefix+key)
		require.NoError(t, err)
		if _, ok := keys[owner.Options().Addr]; !ok {
			keys[owner.Options().Addr] = key
		}
	}
	require.Len(t, keys, 3, "a key for each of the 3 primaries")
	return keys
}

// owner returns a plain client for the primary that owns key's slot.
func owner(t *testing.T, cc *redis.ClusterClient, key string) *redis.Client {
	t.Helper()
	m, err := cc.MasterForKey(t.Context(), key)
	require.NoError(t, err)
	return redistest.Client(t, m.Options().Addr)
}

func clusterSlotOf(t *testing.T, cc *redis.ClusterClient, key string) int64 {
	t.Helper()
	s, err := cc.ClusterKeySlot(t.Context(), key).Result()
	require.NoError(t, err)
	return s
}

// newClusterClient returns a second, independent go-redis client for the
// same cluster (another process, as far as the lock can tell).
func newClusterClient(t *testing.T, cc *redis.ClusterClient) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 cc.Options().Addrs,
		ContextTimeoutEnabled: true,
		DialTimeout:           redistest.ClientTimeout,
		ReadTimeout:           redistest.ClientTimeout,
		WriteTimeout:          redistest.ClientTimeout,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestClusterSingle runs package single against a real Redis Cluster of three
// primaries (no replicas).
func TestSingleClusterSingle(t *testing.T) {
	cc := redistest.Cluster(t, 3)
	const prefix = "lock:"

	// Lock, extend and release on keys whose slots belong to three different
	// primaries; each key is checked on the primary that owns it.
	t.Run("KeysOnEveryPrimary", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix))
		keys := keyOnEachPrimary(t, cc, prefix)
		slots := map[int64]bool{}
		for addr, key := range keys {
			m, err := c.NewMutex(key)
			require.NoError(t, err)
			full := m.Key()
			slots[clusterSlotOf(t, cc, full)] = true
			node := owner(t, cc, full)
			require.Equal(t, addr, node.Options().Addr)

			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			got, err := node.Get(ctx, full).Result()
			require.NoError(t, err, "the key is on the primary that owns its slot")
			assert.Equal(t, l.Value(), got)

			require.NoError(t, node.PExpire(ctx, full, time.Second).Err())
			require.NoError(t, l.Extend(ctx))
			pttl, err := node.PTTL(ctx, full).Result()
			require.NoError(t, err)
			assert.Greater(t, pttl, 5*time.Second, "Extend set a fresh TTL on the owning primary")

			require.NoError(t, l.Release(ctx))
			n, err := node.Exists(ctx, full).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "Release deleted the key")
		}
		assert.Len(t, slots, 3, "three different slots")
	})

	// Inspect over a Cluster client reads each key where its slot lives:
	// the holder, its TTL and its fencing token, whichever primary owns it.
	t.Run("Inspect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second),
			redlock.WithKeyPrefix(prefix), redlock.WithFencing())
		for _, key := range keyOnEachPrimary(t, cc, prefix) {
			m, err := c.NewMutex(key)
			require.NoError(t, err)
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			ins, err := c.Inspect(ctx, key)
			require.NoError(t, err)
			require.Len(t, ins.Nodes, 1)
			n := ins.Nodes[0]
			require.NoError(t, n.Err)
			assert.True(t, n.Quarantine.Cluster, "no quarantine over Cluster")
			assert.Zero(t, n.Quarantine.Left)
			assert.Equal(t, l.Value(), n.Holder)
			assert.Equal(t, l.Token(), n.Token)
			assert.Greater(t, n.TTL, 5*time.Second)
			require.NoError(t, l.Release(ctx))
			ins, err = c.Inspect(ctx, key)
			require.NoError(t, err)
			assert.Empty(t, ins.Nodes[0].Holder, "released")
			assert.Equal(t, l.Token(), ins.Nodes[0].Token, "the counter outlives the lease")
		}
	})

	// Two independent cluster clients contend for one key: the second gets
	// ErrTaken (contention, not an outage) until the first releases.
	t.Run("Contention", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		a := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix))
		b := newSingleClient(t, newClusterClient(t, cc), redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix),
			redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
		key := redistest.Key(t)
		ma, mb := singleMutex(t, a, key), singleMutex(t, b, key)
		la, err := ma.TryLock(ctx)
		require.NoError(t, err)
		_, err = mb.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.ErrorIs(t, err, redlock.ErrTaken)
		var ne redlock.NodeError
		require.ErrorAs(t, err, &ne)
		assert.Equal(t, 0, ne.Index)
		_, err = mb.Lock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken, "Lock gives up under StopBackOff")

		require.NoError(t, la.Release(ctx))
		lb, err := mb.TryLock(ctx)
		require.NoError(t, err, "free again after Release")
		require.NoError(t, lb.Release(ctx))
	})

	// Release notices over Cluster: the release script's PUBLISH, on the key's
	// primary, reaches every node of the cluster, so a waiter of another
	// cluster client is woken whichever node its subscription connection went
	// to (an hour's back-off: nothing else could wake it), for keys on every
	// primary.
	t.Run("Wakeup", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		a := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix))
		b := newSingleClient(t, newClusterClient(t, cc), redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix),
			redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }))
		for addr, key := range keyOnEachPrimary(t, cc, prefix) {
			ma, mb := singleMutex(t, a, key), singleMutex(t, b, key)
			la, err := ma.TryLock(ctx)
			require.NoError(t, err)
			got := locktest.LockThenRelease(ctx, mb)
			require.Eventually(t, func() bool { _, s := redlock.WakeState(b, ma.Key()); return s == 1 }, 10*time.Second, time.Millisecond,
				"B subscribed for the key on %s", addr)
			require.NoError(t, la.Release(ctx))
			require.NoError(t, <-got, "B woken for the key on %s", addr)
		}
	})

	// A key with its own hash tag: the lock works, and its fence key keeps the
	// tag, so both live in the tag's slot.
	t.Run("OwnHashTag", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		key := "{user:1}:lock-" + redistest.Key(t)
		assert.Equal(t, key+":fence", redlock.FenceKeyOf(key))
		assert.Equal(t, clusterSlotOf(t, cc, "user:1"), clusterSlotOf(t, cc, key))
		assert.Equal(t, clusterSlotOf(t, cc, key), clusterSlotOf(t, cc, redlock.FenceKeyOf(key)))

		c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second))
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		node := owner(t, cc, "user:1")
		got, err := node.Get(ctx, key).Result()
		require.NoError(t, err, "the key is on the primary that owns the tag's slot")
		assert.Equal(t, l.Value(), got)
		require.NoError(t, l.Extend(ctx))
		require.NoError(t, l.Release(ctx))
		n, err := node.Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})

	// WithFencing on a Cluster: tokens increase by one per acquisition on keys
	// owned by each primary, and on a key with its own hash tag; the fence
	// hash sits in the lock key's slot, on the same primary.
	t.Run("Fencing", func(t *testing.T) {
		keys := map[string]string{"OwnHashTag": "{user:1}:lock-" + redistest.Key(t)}
		for addr, k := range keyOnEachPrimary(t, cc, prefix) {
			keys["PrimaryAt"+addr] = prefix + k
		}
		c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())
		for name, key := range keys {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				fk := redlock.FenceKeyOf(key)
				require.Equal(t, clusterSlotOf(t, cc, key), clusterSlotOf(t, cc, fk), "the fence hash shares the lock key's slot")
				m, err := c.NewMutex(key)
				require.NoError(t, err)
				t.Logf("%q is in slot %d", key, clusterSlotOf(t, cc, key))
				last := locktest.Tokens(ctx, t, m, 3)
				got, err := owner(t, cc, key).HGet(ctx, fk, "t").Result()
				require.NoError(t, err, "the counter is on the lock key's primary")
				assert.Equal(t, last.String(), got)
			})
		}
	})

	// The restart quarantine needs one marker per node, which a Cluster
	// client cannot address: New refuses it with a clear error.
	t.Run("QuarantineRefused", func(t *testing.T) {
		c, err := single.New(cc, redlock.WithTTL(time.Second), redlock.WithQuarantine(10*time.Second))
		require.Error(t, err)
		assert.Nil(t, c)
		var ce *redlock.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), "Redis Cluster client")
		assert.Contains(t, err.Error(), "quarantine")
	})

	// The same refusal applies when the quarantine is given to NewMutex as
	// an override (options configure "a Client or one Mutex").
	t.Run("QuarantineRefusedInNewMutex", func(t *testing.T) {
		c := newSingleClient(t, cc, redlock.WithTTL(time.Second))
		m, err := c.NewMutex(redistest.Key(t), redlock.WithQuarantine(10*time.Second))
		var ce *redlock.ConfigError
		if !assert.ErrorAs(t, err, &ce, "NewMutex accepted WithQuarantine on a Cluster client") {
			_, lockErr := m.TryLock(t.Context())
			t.Logf("TryLock with that mutex: %v", lockErr)
			return
		}
		assert.Nil(t, m)
		assert.Contains(t, err.Error(), "Redis Cluster client")
	})

	// CheckNodes with a Cluster client should not report the cluster safe
	// while one of its primaries can lose acknowledged writes. Here two
	// primaries run appendonly yes / appendfsync always and one appendonly
	// no (also with appendfsync always, so only appendonly shows the risk).
	// Runs last: it changes the primaries' persistence.
	t.Run("CheckNodesSeesEveryPrimary", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var primaries []string
		for _, k := range keyOnEachPrimary(t, cc, prefix) {
			primaries = append(primaries, owner(t, cc, prefix+k).Options().Addr)
		}
		require.Len(t, primaries, 3)
		for i, addr := range primaries {
			pc := redistest.Client(t, addr)
			require.NoError(t, pc.ConfigSet(ctx, "appendfsync", "always").Err())
			if i > 0 {
				require.NoError(t, pc.ConfigSet(ctx, "appendonly", "yes").Err())
			}
		}
		c := newSingleClient(t, cc, redlock.WithNodeTimeout(time.Second))
		for i := 0; i < 6; i++ {
			checks := c.CheckNodes(ctx)
			require.Len(t, checks, 1)
			require.NoError(t, checks[0].Err)
			assert.False(t, (checks[0].Err == nil && len(checks[0].Risks) == 0), "call %d: primary %s has appendonly off, yet CheckNodes reports %+v", i, primaries[0], checks[0])
			assert.Contains(t, strings.Join(checks[0].Risks, "; "), primaries[0], "the risk names the primary")
		}
	})

	// A key whose braces form no usable hash tag but which contains '}' has
	// no fence key in its own slot: a fenced acquire fails loudly (CROSSSLOT),
	// never with a counter elsewhere.
	t.Run("FencingKeyWithoutUsableTag", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		key := "{}" + redistest.Key(t) + "}"
		require.NotEqual(t, clusterSlotOf(t, cc, key), clusterSlotOf(t, cc, redlock.FenceKeyOf(key)))
		c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		var ne redlock.NodeError
		require.ErrorAs(t, err, &ne)
		assert.Contains(t, ne.Error(), "CROSSSLOT")
		assert.False(t, errors.Is(err, redlock.ErrTaken))
		n, err := cc.Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing left behind")
	})

	t.Run("MultiKey", func(t *testing.T) { clusterMultiKey(t, cc) })
	t.Run("RWMutex", func(t *testing.T) { clusterRWMutex(t, cc) })
	t.Run("RWMutexKeys", func(t *testing.T) { clusterRWKeys(t, cc) })
	t.Run("Semaphore", func(t *testing.T) { clusterSemaphore(t, cc) })
}

// A failover to an asynchronous replica that had not received the lock key
// and the fence counter's last increment: a second client acquires while the
// first lease is still valid, but with a higher token (the clock floor).
// Replication is cut
// deterministically: the replica is stopped and its link closed before the
// acquire, and the primary is killed before the replica resumes.
func TestSingleClusterFailoverLosesLockNotToken(t *testing.T) {
	cc, nodes := redistest.ClusterWithReplicas(t, 3, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	key := "lock:" + redistest.Key(t)

	primaryAddr := owner(t, cc, key).Options().Addr
	var primary, replica *redisnode.Node
	for _, n := range nodes {
		info, err := redistest.Client(t, n.Addr()).Info(ctx, "replication").Result()
		require.NoError(t, err)
		switch {
		case n.Addr() == primaryAddr:
			primary = n
		case strings.Contains(info, fmt.Sprintf("master_port:%d\r", portOf(t, primaryAddr))):
			replica = n
		}
	}
	require.NotNil(t, primary)
	require.NotNil(t, replica, "the primary of %q has a replica", key)

	// CheckNodes, given the replica as a node, says it is one.
	checks := newSingleClient(t, redistest.Client(t, replica.Addr()), redlock.WithNodeTimeout(time.Second)).CheckNodes(ctx)
	require.NoError(t, checks[0].Err)
	assert.Equal(t, "slave", checks[0].Role)
	assert.Contains(t, strings.Join(checks[0].Risks, "; "), "the node is a replica")

	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	a := newSingleClient(t, cc, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing(), stop)
	bRedis := newClusterClient(t, cc)
	b := newSingleClient(t, bRedis, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing(), stop)
	ma, err := a.NewMutex(key)
	require.NoError(t, err)
	mb, err := b.NewMutex(key)
	require.NoError(t, err)

	// Two acquisitions that the replica has received (the counter is 2 on
	// both), then one only the primary learns of.
	la := leaseReplicaMisses(ctx, t, ma, redistest.Client(t, primary.Addr()), replica)
	require.Greater(t, la.Token(), fencing.Token(2))

	// The primary dies; the replica is promoted without it.
	require.NoError(t, primary.Kill())
	require.NoError(t, replica.Resume())
	require.NoError(t, redistest.Client(t, replica.Addr()).Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err())

	// B, on its own cluster client, acquires once the cluster routes the
	// slot to the promoted replica.
	var lb *redlock.Lease
	require.Eventually(t, func() bool {
		bRedis.ReloadState(ctx)
		l, err := mb.TryLock(ctx)
		if err != nil {
			return false
		}
		lb = l
		return true
	}, 20*time.Second, 50*time.Millisecond, "B never acquired after the failover")
	assert.True(t, time.Now().Before(la.ValidUntil()), "A's lease is still valid: two holders at once")
	assert.Nil(t, la.Err(), "A's lease has not ended")
	assert.Greater(t, lb.Token(), la.Token(), "the counter's last increment was lost, the clock floor was not")
	require.NoError(t, lb.Release(ctx))
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}
