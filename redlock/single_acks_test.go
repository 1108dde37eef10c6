package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testclock"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// requireAckError asserts that err is a failed acquire or extend because
// got of want replicas acknowledged it.
func requireAckError(t *testing.T, err error, want, got int) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrReplicaAcks)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d of %d replicas within", got, want), "replicas that acknowledged, of those asked for")
	assert.NotContains(t, err.Error(), "WAIT failed")
}

// replicaValue returns the value of key on a replica, read on its own
// connection after READONLY (which a Cluster replica needs; elsewhere it is
// refused, and GET works without it).
func replicaValue(t *testing.T, replica *redisnode.Node, key string) string {
	t.Helper()
	conn := redistest.Client(t, replica.Addr()).Conn()
	defer conn.Close()
	_ = conn.ReadOnly(t.Context()).Err()
	v, err := conn.Get(t.Context(), key).Result()
	if err == redis.Nil || redis.HasErrorPrefix(err, "MOVED") { //nolint:errorlint // go-redis returns the sentinel itself
		return "" // absent, or (Cluster) the replica of another primary's slots
	}
	require.NoError(t, err)
	return v
}

// requireExtendWaitsForReplica asserts, with the replica paused, that an
// Extend of l fails because 0 of 1 replicas acknowledged it, without losing
// the lease; then resumes the replica and asserts that, once the primary
// lists it online, l extends and releases.
func requireExtendWaitsForReplica(t *testing.T, l *redlock.Lease, primary, replica *redisnode.Node) {
	t.Helper()
	ctx := t.Context()
	err := l.Extend(ctx)
	requireAckError(t, err, 1, 0)
	assert.NotErrorIs(t, err, redlock.ErrLost)
	assert.NoError(t, l.Err())
	require.NoError(t, replica.Resume())
	redistest.WaitOnline(t, primary, 1)
	require.NoError(t, l.Extend(ctx))
	require.NoError(t, l.Release(ctx))
}

// ackedClient starts a primary with one replica and returns a Client on the
// primary with a 10s TTL, WithReplicaAcks(1, 300ms) and no retries, with the
// nodes and an admin client of the primary.
func ackedClient(t *testing.T) (c *redlock.Client, primary, replica *redisnode.Node, pc *redis.Client) {
	t.Helper()
	primary, replica, pc = oneReplica(t)
	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	c = newSingleClient(t, redistest.Client(t, primary.Addr()), redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second),
		redlock.WithReplicaAcks(1, 300*time.Millisecond), stop)
	return c, primary, replica, pc
}

// freshMutex returns c's mutex for a fresh key, with fencing or without.
func freshMutex(t *testing.T, c *redlock.Client, fenced bool) *redlock.Mutex {
	t.Helper()
	var opts []redlock.Option
	if fenced {
		opts = append(opts, redlock.WithFencing())
	}
	m, err := c.NewMutex(redistest.Key(t), opts...)
	require.NoError(t, err)
	return m
}

// TestReplicaAcks: with WithReplicaAcks(1, ...), a lease that TryLock
// returns is on the replica already (plain SET and the fenced script); with
// the replica stopped, an acquire fails saying 0 of 1 replicas acknowledged
// and leaves no key behind, and an extend fails the same way without moving
// ValidUntil or losing the lease; once the replica is back, an extend moves
// ValidUntil to exactly its start + TTL - drift allowance.
func TestSingleReplicaAcks(t *testing.T) {
	t.Parallel()
	c, primary, replica, pc := ackedClient(t)
	ctx := t.Context()
	const ttl = 10 * time.Second // ackedClient's
	clock := testclock.New(time.Now())
	redlock.SetClock(c, clock.Now)

	for _, fenced := range []bool{false, true} {
		m := freshMutex(t, c, fenced)
		l, err := m.TryLock(ctx)
		require.NoError(t, err, "fenced %v", fenced)
		assert.Equal(t, l.Value(), replicaValue(t, replica, m.Key()), "fenced %v: the replica has the key when TryLock returns", fenced)
		require.NoError(t, l.Release(ctx))
	}

	lease, err := freshMutex(t, c, true).TryLock(ctx)
	require.NoError(t, err)
	before := lease.ValidUntil()

	require.NoError(t, replica.Pause())
	for _, fenced := range []bool{false, true} {
		m := freshMutex(t, c, fenced)
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "fenced %v", fenced)
		requireAckError(t, err, 1, 0)
		assert.Zero(t, pc.Exists(ctx, m.Key()).Val(), "fenced %v: the failed acquire deleted its key", fenced)
	}
	clock.Add(time.Second)
	err = lease.Extend(ctx)
	requireAckError(t, err, 1, 0)
	assert.NotErrorIs(t, err, redlock.ErrLost)
	assert.Contains(t, err.Error(), "stays valid until its current deadline")
	assert.Equal(t, before, lease.ValidUntil(), "an unacknowledged extend does not extend")
	assert.NoError(t, lease.Err())

	require.NoError(t, replica.Resume())
	redistest.WaitOnline(t, primary, 1)
	start := clock.Add(time.Second)
	require.NoError(t, lease.Extend(ctx))
	assert.Equal(t, start.Add(ttl-ttl/100-2*time.Millisecond), lease.ValidUntil(), "start + TTL - drift allowance")
	require.NoError(t, lease.Release(ctx))
}

// TestReplicaAcksAfterScriptFlush: an acquire or extend script that Redis no
// longer knows (NOSCRIPT) is re-sent as EVAL with a WAIT of its own, so it
// too counts only once acknowledged.
func TestSingleReplicaAcksAfterScriptFlush(t *testing.T) {
	t.Parallel()
	primary, replica, pc := oneReplica(t)
	ctx := t.Context()
	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	c := newSingleClient(t, redistest.Client(t, primary.Addr()), redlock.WithNodeTimeout(time.Second),
		redlock.WithReplicaAcks(1, 200*time.Millisecond), redlock.WithFencing(), stop)
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	m2, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)

	require.NoError(t, replica.Pause())
	require.NoError(t, pc.ScriptFlush(ctx).Err())
	requireAckError(t, lease.Extend(ctx), 1, 0)
	require.NoError(t, pc.ScriptFlush(ctx).Err())
	_, err = m2.TryLock(ctx)
	requireAckError(t, err, 1, 0)
	assert.Zero(t, pc.Exists(ctx, m2.Key()).Val(), "the failed acquire deleted its key")

	require.NoError(t, replica.Resume())
	redistest.WaitOnline(t, primary, 1)
	require.NoError(t, pc.ScriptFlush(ctx).Err())
	require.NoError(t, lease.Extend(ctx))
	require.NoError(t, pc.ScriptFlush(ctx).Err())
	l2, err := m2.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, l2.Value(), replicaValue(t, replica, m2.Key()), "the replica has the key when TryLock returns")
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, lease.Release(ctx))
}

// TestReplicaAcksHandover: the acquire a release hands to the next waiting
// Lock of the same Client (wake-up) waits for the acknowledgement too: with
// the replica stopped, B's handed attempt fails on it and leaves no key.
func TestSingleReplicaAcksHandover(t *testing.T) {
	t.Parallel()
	primary, replica, pc := oneReplica(t)
	ctx := t.Context()
	c := newSingleClient(t, redistest.Client(t, primary.Addr()), redlock.WithNodeTimeout(time.Second),
		redlock.WithReplicaAcks(1, 200*time.Millisecond),
		// B tries twice: once while A holds, once when A's release wakes it.
		redlock.WithRetry(func() backoff.BackOff {
			return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Minute), 1)
		}))
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	la, err := m.TryLock(ctx)
	require.NoError(t, err)

	errB := make(chan error, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			_ = l.Release(context.Background())
		}
		errB <- err
	}()
	require.Eventually(t, func() bool { waiting, _ := redlock.WakeState(c, m.Key()); return waiting == 1 },
		10*time.Second, 5*time.Millisecond, "B waits for the lock")
	require.NoError(t, replica.Pause())
	defer func() { _ = replica.Resume() }()
	require.NoError(t, la.Release(ctx))
	err = <-errB
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	requireAckError(t, err, 1, 0)
	assert.Zero(t, pc.Exists(ctx, m.Key()).Val(), "B's failed acquire deleted its key")
}

// TestReplicaAcksMoreThanReplicas: asking for more replicas than are
// online fails every acquire, saying how many acknowledged, and CheckNodes
// names the shortfall.
func TestSingleReplicaAcksMoreThanReplicas(t *testing.T) {
	t.Parallel()
	primary, _ := redistest.Replicated(t, 1)
	ctx := t.Context()
	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	two := newSingleClient(t, redistest.Client(t, primary.Addr()), redlock.WithReplicaAcks(2, 100*time.Millisecond), stop)
	m, err := two.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	requireAckError(t, err, 2, 1)

	checks := two.CheckNodes(ctx)
	require.NoError(t, checks[0].Err)
	assert.Equal(t, 1, checks[0].Replicas)
	assert.Equal(t, 1, checks[0].OnlineReplicas)
	assert.Contains(t, strings.Join(checks[0].Risks, "; "), "asks for 2 replica(s) but 1 are online")

	one := newSingleClient(t, redistest.Client(t, primary.Addr()), redlock.WithReplicaAcks(1, 100*time.Millisecond))
	checks = one.CheckNodes(ctx)
	require.NoError(t, checks[0].Err)
	assert.Less(t, checks[0].ReplicaLag, 5*time.Second)
	assert.NotContains(t, strings.Join(checks[0].Risks, "; "), "replica", "every replica acknowledges: no replica risk")
	off := newSingleClient(t, redistest.Client(t, primary.Addr()))
	checks = off.CheckNodes(ctx)
	assert.Contains(t, strings.Join(checks[0].Risks, "; "), "1 asynchronous replica(s)")
}

// TestReplicaAcksConfig: what WithReplicaAcks refuses, with a *ConfigError
// that says why.
func TestSingleReplicaAcksConfig(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	rc := redistest.Client(t, node.Addr())
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   []redlock.Option
		want   string
	}{
		{"negative count", rc, []redlock.Option{redlock.WithReplicaAcks(-1, time.Second)}, "replica count must be in [0, 100]"},
		{"absurd count", rc, []redlock.Option{redlock.WithReplicaAcks(101, time.Second)}, "replica count must be in [0, 100]"},
		{"zero timeout", rc, []redlock.Option{redlock.WithReplicaAcks(1, 0)}, "at least 1ms"},
		{"sub-millisecond timeout", rc, []redlock.Option{redlock.WithReplicaAcks(1, 500*time.Microsecond)}, "at least 1ms"},
		{"longer than half the TTL", rc, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100 * time.Millisecond),
			redlock.WithReplicaAcks(1, 400*time.Millisecond)}, "must be below half the TTL"},
		{"ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": node.Addr()}}),
			[]redlock.Option{redlock.WithReplicaAcks(1, time.Second)}, "is a Ring"},
		{"read timeout", redis.NewClient(&redis.Options{Addr: node.Addr(), ReadTimeout: 500 * time.Millisecond}),
			[]redlock.Option{redlock.WithReplicaAcks(1, time.Second)}, "ReadTimeout 500ms is below"},
		{"read timeout, context deadlines on", redis.NewClient(&redis.Options{Addr: node.Addr(), ReadTimeout: 500 * time.Millisecond, ContextTimeoutEnabled: true}),
			[]redlock.Option{redlock.WithReplicaAcks(1, time.Second)}, "even with ContextTimeoutEnabled"},
	} {
		c, err := single.New(tc.client, tc.opts...)
		var ce *redlock.ConfigError
		if assert.ErrorAs(t, err, &ce, tc.name) {
			assert.Contains(t, ce.Error(), tc.want, tc.name)
		}
		if c != nil {
			_ = c.Close()
		}
		if tc.client != rc {
			_ = tc.client.Close()
		}
	}

	c := newSingleClient(t, rc, redlock.WithReplicaAcks(1, 100*time.Millisecond))
	_, err := c.NewMutex("k", redlock.WithReplicaAcks(2, time.Second))
	assert.ErrorContains(t, err, "for the whole Client")
	_, err = c.NewMutex("k", redlock.WithTTL(200*time.Millisecond))
	assert.ErrorContains(t, err, "must be below half the TTL", "a Mutex's shorter TTL still leaves room for the WAIT")
	_, err = c.NewMutex("k", redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(2950*time.Millisecond))
	assert.ErrorContains(t, err, "ReadTimeout 2s is below", "a Mutex's longer node timeout must still fit the client's ReadTimeout")
	_, err = c.NewMutex("k")
	require.NoError(t, err)
	off := newSingleClient(t, rc, redlock.WithReplicaAcks(0, time.Hour))
	_, err = off.NewMutex("k")
	require.NoError(t, err, "0 turns it off, whatever the timeout")
}

// TestReplicaAcksCluster: over a Redis Cluster, each key's WAIT reaches the
// connection that wrote it on the key's own primary: leases on keys of all
// three primaries, taken at once, are on a replica when TryLock returns,
// and with every replica stopped each primary's acquire fails on the
// acknowledgement (a WAIT sent to any other connection would count the
// stopped replica for writes it already had).
func TestSingleReplicaAcksCluster(t *testing.T) {
	t.Parallel()
	cc, nodes := redistest.ClusterWithReplicas(t, 3, 1)
	ctx := t.Context()
	var replicas []*redisnode.Node
	for _, n := range nodes {
		info, err := redistest.Client(t, n.Addr()).Info(ctx, "replication").Result()
		require.NoError(t, err)
		if strings.Contains(info, "role:master") {
			redistest.WaitOnline(t, n, 1)
		} else {
			replicas = append(replicas, n)
		}
	}
	require.Len(t, replicas, 3)
	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	c := newSingleClient(t, cc, redlock.WithNodeTimeout(time.Second), redlock.WithReplicaAcks(1, 300*time.Millisecond), redlock.WithFencing(), stop)

	var mutexes []*redlock.Mutex
	for _, key := range keyOnEachPrimary(t, cc, "") {
		m, err := c.NewMutex(key)
		require.NoError(t, err)
		mutexes = append(mutexes, m)
	}
	leases := make([]*redlock.Lease, len(mutexes))
	errs := make([]error, len(mutexes))
	var wg sync.WaitGroup
	for i, m := range mutexes {
		wg.Go(func() { leases[i], errs[i] = m.TryLock(ctx) })
	}
	wg.Wait()
	for i, m := range mutexes {
		require.NoError(t, errs[i], m.Key())
		var on []string
		for _, r := range replicas {
			if replicaValue(t, r, m.Key()) == leases[i].Value() {
				on = append(on, r.Addr())
			}
		}
		assert.Len(t, on, 1, "%s is on its primary's replica when TryLock returns", m.Key())
		require.NoError(t, leases[i].Release(ctx))
	}

	for _, r := range replicas {
		require.NoError(t, r.Pause())
	}
	defer func() {
		for _, r := range replicas {
			_ = r.Resume()
		}
	}()
	for _, m := range mutexes {
		_, err := m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, m.Key())
		requireAckError(t, err, 1, 0)
		assert.Zero(t, cc.Exists(ctx, m.Key()).Val(), "%s: the failed acquire deleted its key", m.Key())
	}
}
