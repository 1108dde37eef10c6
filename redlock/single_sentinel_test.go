package redlock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// startSentinel starts a Sentinel rig with the given number of replicas and
// returns it with a context that ends after timeout or with the test.
func startSentinel(t *testing.T, replicas int, timeout time.Duration) (*redistest.SentinelRig, context.Context) {
	t.Helper()
	rig := redistest.Sentinel(t, replicas)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return rig, ctx
}

// sentinelMutexes returns A's and B's mutexes for key, each over its own
// failover client of rig, with fencing, no retries and extra.
func sentinelMutexes(t *testing.T, rig *redistest.SentinelRig, key string, ttl time.Duration, extra ...redlock.Option) (a, b *redlock.Mutex) {
	t.Helper()
	stop := redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} })
	opts := append([]redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(time.Second), redlock.WithFencing(), stop}, extra...)
	a = singleMutex(t, newSingleClient(t, rig.FailoverClient(t), opts...), key)
	b = singleMutex(t, newSingleClient(t, rig.FailoverClient(t), opts...), key)
	return a, b
}

// acquireAfterFailover makes TryLock attempts with m every 20ms until one
// succeeds, bounded by redistest.SentinelConvergeTimeout, and returns the
// lease and how many attempts were refused because the lock was taken.
func acquireAfterFailover(ctx context.Context, t *testing.T, m *redlock.Mutex) (*redlock.Lease, int) {
	t.Helper()
	var (
		l     *redlock.Lease
		taken int
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		l, err = m.TryLock(ctx)
		if errors.Is(err, redlock.ErrTaken) {
			taken++
		}
		require.NoError(c, err, "no acquisition after the failover") // the last attempt's error, on failure
	}, redistest.SentinelConvergeTimeout, 20*time.Millisecond)
	return l, taken
}

// acquireAfterLease acquires with mb after the primary was killed at killed
// (acquireAfterFailover) and asserts that B got the lock only once A's lease
// la was over (no double grant), with a token above A's.
func acquireAfterLease(ctx context.Context, t *testing.T, mb *redlock.Mutex, la *redlock.Lease, killed time.Time) *redlock.Lease {
	t.Helper()
	lb, taken := acquireAfterFailover(ctx, t, mb)
	granted := time.Now()
	t.Logf("recovery: B acquired %v after the primary was killed (A's lease had %v left then), refused %d times for A's key first",
		granted.Sub(killed).Round(time.Millisecond), la.ValidUntil().Sub(killed).Round(time.Millisecond), taken)
	assert.False(t, granted.Before(la.ValidUntil()), "B acquired while A's lease was valid")
	assert.Greater(t, lb.Token(), la.Token(), "B's token is above A's")
	return lb
}

// promoted waits until the Sentinels agree on a new primary, which must be
// one of the replicas, and returns it.
func promoted(ctx context.Context, t *testing.T, rig *redistest.SentinelRig, fc *redis.Client) *redisnode.Node {
	t.Helper()
	require.Eventually(t, func() bool {
		role, err := fc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, redistest.SentinelConvergeTimeout, 20*time.Millisecond, "the failover client reaches no primary")
	sc := redis.NewSentinelClient(&redis.Options{Addr: rig.Sentinels[0].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer sc.Close()
	got, err := sc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
	require.NoError(t, err)
	require.Len(t, got, 2)
	n := rig.Node(net.JoinHostPort(got[0], got[1]))
	require.NotNil(t, n, "Sentinel names %v as the primary", got)
	require.NotSame(t, rig.Primary, n, "a replica was promoted")
	rig.WaitPrimary(t, n)
	return n
}

// TestSentinelFailover runs single over go-redis's failover client, as
// users run it: A holds a fenced lock whose key the replicas have
// (WAIT), the primary is killed, Sentinel promotes a replica, both
// failover clients follow, and B acquires, but only once A's key has
// expired on the promoted replica, with a token above A's.
func TestSingleSentinelFailover(t *testing.T) {
	t.Parallel()
	rig, ctx := startSentinel(t, 2, 60*time.Second)
	key := redistest.Key(t)
	ma, mb := sentinelMutexes(t, rig, key, 5*time.Second)

	la, err := ma.TryLock(ctx)
	require.NoError(t, err)
	require.Positive(t, la.Token())
	pc := redistest.Client(t, rig.Primary.Addr())
	replicated(ctx, t, pc, 2, "both replicas have A's key and counter")
	_, err = mb.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrTaken, "B is refused while A holds the lock")

	killed := time.Now()
	require.NoError(t, rig.Primary.Kill())
	lb := acquireAfterLease(ctx, t, mb, la, killed)

	// The failover client reaches the promoted replica, which Sentinel names.
	n := promoted(ctx, t, rig, rig.FailoverClient(t))
	holder, err := redistest.Client(t, n.Addr()).Get(ctx, key).Result()
	require.NoError(t, err)
	assert.NotEmpty(t, holder, "B's key is on the promoted replica")
	// A's lease is over: its key expired and B's replaced it.
	assert.ErrorIs(t, la.Extend(ctx), redlock.ErrLost)
	require.NoError(t, lb.Release(ctx))
}

// TestSentinelFailoverLosesLockNotToken is the documented unsafe case of
// single over Sentinel: with the replica link held up when A acquires,
// the failover loses A's key and its counter's increment, B acquires while
// A's lease is valid, and B's token is still above A's (the clock floor),
// so a fencing guard rejects A's late write. The replication is held up
// deterministically: the replica is stopped and its link closed before
// A's acquire, and the primary is killed before the replica resumes.
func TestSingleSentinelFailoverLosesLockNotToken(t *testing.T) {
	t.Parallel()
	rig, ctx := startSentinel(t, 1, 60*time.Second)
	key := redistest.Key(t)
	ma, mb := sentinelMutexes(t, rig, key, 30*time.Second)
	guard := fencing.NewMemoryGuard()
	replica := rig.Replicas[0]

	// Two acquisitions that the replica has received, then one it has not.
	la := leaseReplicaMisses(ctx, t, ma, redistest.Client(t, rig.Primary.Addr()), replica)
	require.NoError(t, guard.Check(ctx, key, la.Token()), "A writes")

	killed := time.Now()
	require.NoError(t, rig.Primary.Kill())
	require.NoError(t, replica.Resume())
	lb, taken := acquireAfterFailover(ctx, t, mb)
	granted := time.Now()
	t.Logf("recovery: B acquired %v after the primary was killed", granted.Sub(killed).Round(time.Millisecond))
	assert.Zero(t, taken, "B was never refused: the promoted replica never saw A's key")
	assert.True(t, granted.Before(la.ValidUntil()), "B acquired while A's lease was valid: two holders at once")
	assert.Nil(t, la.Err(), "A's lease has not ended as far as A knows")
	assert.Greater(t, lb.Token(), la.Token(), "the counter's increment was lost, the clock floor was not")
	require.NoError(t, guard.Check(ctx, key, lb.Token()), "B writes")
	var stale *fencing.StaleTokenError
	require.ErrorAs(t, guard.Check(ctx, key, la.Token()), &stale, "A's late write is rejected")
	require.ErrorIs(t, stale, fencing.ErrStaleToken)
	assert.Equal(t, lb.Token(), stale.Current)
	assert.Same(t, replica, promoted(ctx, t, rig, rig.FailoverClient(t)))
	require.NoError(t, lb.Release(ctx))
}

// TestSentinelFailoverReplicaAcks is the failover of
// TestSentinelFailoverLosesLockNotToken with WithReplicaAcks(1, ...): with
// the replica link held up, A's acquire fails on the acknowledgement
// instead of succeeding; once the replica is back A acquires, the primary
// is killed and Sentinel promotes the replica, which has A's key. The new
// primary has no replica until the old one restarts as its replica, so
// grants resume only then, and B acquires only once A's lease
// is over (no double grant), with a token above A's.
func TestSingleSentinelFailoverReplicaAcks(t *testing.T) {
	t.Parallel()
	rig, ctx := startSentinel(t, 1, 90*time.Second)
	key := redistest.Key(t)
	ma, mb := sentinelMutexes(t, rig, key, 5*time.Second, redlock.WithReplicaAcks(1, 300*time.Millisecond))
	replica := rig.Replicas[0]

	cutOff(ctx, t, redistest.Client(t, rig.Primary.Addr()), replica)
	_, err := ma.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "an acquire the replica cannot acknowledge fails")
	requireAckError(t, err, 1, 0)
	require.NoError(t, replica.Resume())
	redistest.WaitOnline(t, rig.Primary, 1)

	la, err := ma.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, la.Value(), replicaValue(t, replica, key), "the replica has A's key")
	killed := time.Now()
	require.NoError(t, rig.Primary.Kill())
	assert.Same(t, replica, promoted(ctx, t, rig, rig.FailoverClient(t)))
	_, err = mb.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "no replica acknowledges on the new primary, or A's key is there")

	// The old primary comes back empty as a replica of the new one (by hand,
	// as Sentinel would about 10s later), which then acknowledges again.
	require.NoError(t, rig.Primary.Restart(ctx))
	require.NoError(t, redistest.Client(t, rig.Primary.Addr()).Do(ctx, "REPLICAOF", "127.0.0.1", replica.Port()).Err())
	lb := acquireAfterLease(ctx, t, mb, la, killed)
	assert.ErrorIs(t, la.Extend(ctx), redlock.ErrLost)
	require.NoError(t, lb.Release(ctx))
}
