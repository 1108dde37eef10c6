package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// refusedOnce starts the waiting call, stepped by s, in a goroutine and
// waits until it has had an attempt refused; a call that returns first fails
// the test with its error. The function it returns waits for the call's
// outcome.
func refusedOnce(ctx context.Context, t *testing.T, s *locktest.Stepper, call func(context.Context) (*redlock.Lease, error)) (outcome func() (*redlock.Lease, error)) {
	t.Helper()
	type result struct {
		l   *redlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := call(ctx)
		got <- result{l, err}
	}()
	select {
	case <-s.Failed:
	case res := <-got:
		t.Fatalf("the waiting call returned before an attempt was refused: %v", res.err)
	case <-ctx.Done():
		t.Fatal("the waiting call was never refused")
	}
	return func() (*redlock.Lease, error) {
		res := <-got
		return res.l, res.err
	}
}

// onShapeKeys runs test as a subtest for each of clusterShapeKeys, with a
// 30s context and two Clients, over cc and over a cluster client of their
// own, with a 10s TTL, a 1s node timeout, the key prefix "lock:" and o.
func onShapeKeys(t *testing.T, cc *redis.ClusterClient, test func(ctx context.Context, t *testing.T, key string, a, b *redlock.Client), o ...redlock.Option) {
	const prefix = "lock:"
	o = append([]redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithKeyPrefix(prefix)}, o...)
	for name, key := range clusterShapeKeys(t, cc, prefix) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			test(ctx, t, key, newSingleClient(t, cc, o...), newSingleClient(t, newClusterClient(t, cc), o...))
		})
	}
}

// clusterShapeKeys are the keys the Cluster tests of the lock shapes run
// on: one whose slot each primary owns, and one with its own hash tag.
func clusterShapeKeys(t *testing.T, cc *redis.ClusterClient, prefix string) map[string]string {
	t.Helper()
	keys := map[string]string{"OwnHashTag": "{user:1}:" + redistest.Key(t)}
	for addr, k := range keyOnEachPrimary(t, cc, prefix) {
		keys["PrimaryAt"+addr] = k
	}
	return keys
}

// clusterRWMutex is TestClusterSingle's read-write lock part, on a key of
// each primary and on a key with its own hash tag: the lock key, the
// readers' set, the intent marker and the fence hash are in one slot, and
// the lock works there with two independent cluster clients: readers
// share, a writer and a plain Mutex are refused while they hold, a waiting
// writer's intent marker lands on the key's primary and holds new readers
// back, the writer gets in once the readers leave (with a token), and
// nothing but the fence hash is left at the end.
func clusterRWMutex(t *testing.T, cc *redis.ClusterClient) {
	onShapeKeys(t, cc, func(ctx context.Context, t *testing.T, key string, a, b *redlock.Client) {
		rwA, err := locktest.NewRW(a, key)
		require.NoError(t, err)
		rwB, err := locktest.NewRW(b, key)
		require.NoError(t, err)
		full := rwA.Key()
		readers, intent := redlock.ReadersKeyOf(full), redlock.IntentKeyOf(full)
		for _, k := range []string{readers, intent, redlock.FenceKeyOf(full)} {
			require.Equal(t, clusterSlotOf(t, cc, full), clusterSlotOf(t, cc, k), "%q is in the lock key's slot (CLUSTER KEYSLOT)", k)
		}
		node := owner(t, cc, full)
		t.Logf("%q: slot %d on %s", full, clusterSlotOf(t, cc, full), node.Options().Addr)

		// Readers share, recorded on the key's primary.
		r1, err := rwA.TryRLock(ctx)
		require.NoError(t, err)
		r2, err := rwB.TryRLock(ctx)
		require.NoError(t, err, "a second reader, from another cluster client")
		assert.Zero(t, r1.Token(), "readers get no token")
		got, err := node.ZRange(ctx, readers, 0, -1).Result()
		require.NoError(t, err, "the readers' set is on the lock key's primary")
		assert.ElementsMatch(t, []string{r1.Value(), r2.Value()}, got)
		flag, err := node.Get(ctx, full).Result()
		require.NoError(t, err)
		assert.Equal(t, "redfence:readers", flag)
		require.NoError(t, r1.Extend(ctx))

		// Readers exclude a writer and a plain Mutex.
		_, err = rwB.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		assert.Contains(t, err.Error(), "held by readers")
		_, err = singleMutex(t, b, key).TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken, "a plain Mutex on the key")

		// A waiting writer leaves its intent marker on the key's primary;
		// a new reader is refused, and the writer gets in once the
		// readers have left.
		step := locktest.NewStepper(ctx)
		waiting, err := locktest.NewRW(b, key, step.Option())
		require.NoError(t, err)
		wrote := refusedOnce(ctx, t, step, waiting.Lock)
		n, err := node.Exists(ctx, intent).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "the intent marker is on the lock key's primary")
		_, err = rwA.TryRLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		assert.Contains(t, err.Error(), "a writer waits")
		require.NoError(t, r1.Release(ctx))
		require.NoError(t, r2.Release(ctx))
		step.Next <- struct{}{}
		w, err := wrote()
		require.NoError(t, err, "the writer gets in once the readers left")
		assert.Positive(t, w.Token(), "the writer has a token")
		n, err = node.Exists(ctx, intent, readers).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "the granted writer deleted the marker; the readers' set ended with its last reader")
		v, err := node.Get(ctx, full).Result()
		require.NoError(t, err)
		assert.Equal(t, w.Value(), v)

		// A writer excludes readers, writers and a plain Mutex.
		_, err = rwA.TryRLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		_, err = rwA.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		_, err = singleMutex(t, a, key).TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		require.NoError(t, w.Extend(ctx))
		require.NoError(t, w.Release(ctx))

		w2, err := rwA.TryLock(ctx)
		require.NoError(t, err)
		assert.Greater(t, w2.Token(), w.Token(), "tokens increase")
		require.NoError(t, w2.Release(ctx))
		n, err = node.Exists(ctx, full, readers, intent).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing left but the fence hash")
		last, err := node.HGet(ctx, redlock.FenceKeyOf(full), "t").Uint64()
		require.NoError(t, err, "the counter is on the lock key's primary")
		assert.Equal(t, uint64(w2.Token()), last)
	}, redlock.WithFencing())
}

// clusterRWKeys is TestClusterSingle's check of the read-write lock's key
// names over Cluster: for keys with and without hash tags, with braces in
// odd places, NewRWMutex refuses exactly the keys whose readers' set,
// intent marker or fence hash CLUSTER KEYSLOT puts in another slot than the
// key (a '}' and no usable hash tag), with a *ConfigError that names the
// key, its slots and the remedy; every key it accepts locks for readers and
// a fenced writer on the real Cluster.
func clusterRWKeys(t *testing.T, cc *redis.ClusterClient) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := newSingleClient(t, cc, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())
	base := redistest.Key(t)
	refused := 0
	for _, key := range []string{
		base, "{" + base + "}", "{" + base + "}:rw", base + "{tag}", "x}{" + base + "}",
		"{" + base, base + "{", base + "{x", "{{" + base + "}}",
		"{}" + base, base + "{}", "{}" + base + "}", base + "}", "}" + base, "}{" + base, base + "}{}",
	} {
		slots := map[string]int64{}
		for _, k := range []string{key, redlock.ReadersKeyOf(key), redlock.IntentKeyOf(key), redlock.FenceKeyOf(key)} {
			slots[k] = clusterSlotOf(t, cc, k)
		}
		apart := false
		for _, s := range slots {
			apart = apart || s != slots[key]
		}
		rw, err := locktest.NewRW(c, key)
		if apart {
			refused++
			var ce *redlock.ConfigError
			require.ErrorAs(t, err, &ce, "%q: its keys are in slots %v", key, slots)
			assert.ErrorIs(t, err, redlock.ErrInvalid)
			for _, s := range []string{"Redis Cluster", "different slots", "read-write lock", fmt.Sprintf("%q (slot %d)", key, slots[key]), "hash tag"} {
				assert.Contains(t, err.Error(), s, "%q", key)
			}
			assert.NotContains(t, err.Error(), "multi-key", "%q", key)
			t.Logf("%q refused: %v", key, err)
			continue
		}
		require.NoError(t, err, "%q: every key in slot %d", key, slots[key])
		r, err := rw.TryRLock(ctx)
		require.NoError(t, err, "%q: reader", key)
		require.NoError(t, r.Extend(ctx), "%q", key)
		require.NoError(t, r.Release(ctx), "%q", key)
		w, err := rw.TryLock(ctx)
		require.NoError(t, err, "%q: fenced writer", key)
		assert.Positive(t, w.Token())
		require.NoError(t, w.Release(ctx), "%q", key)
	}
	assert.Equal(t, 7, refused, "the keys with a '}' and no usable hash tag")
}

// clusterSemaphore is TestClusterSingle's semaphore part, on a key of each
// primary and on a key with its own hash tag: two permits, held from two
// cluster clients, recorded on the key's primary; a third holder is refused
// (ErrTaken) and its waiting Acquire gets the permit a holder releases;
// nothing is left at the end.
func clusterSemaphore(t *testing.T, cc *redis.ClusterClient) {
	onShapeKeys(t, cc, func(ctx context.Context, t *testing.T, key string, a, b *redlock.Client) {
		sa, err := locktest.NewSem(a, key, 2)
		require.NoError(t, err)
		sb, err := locktest.NewSem(b, key, 2)
		require.NoError(t, err)
		full := sa.Key()
		node := owner(t, cc, full)
		t.Logf("%q: slot %d on %s", full, clusterSlotOf(t, cc, full), node.Options().Addr)

		l1, err := sa.TryAcquire(ctx)
		require.NoError(t, err)
		l2, err := sb.TryAcquire(ctx)
		require.NoError(t, err)
		got, err := node.ZRange(ctx, full, 0, -1).Result()
		require.NoError(t, err, "the holders are on the key's primary")
		assert.ElementsMatch(t, []string{l1.Value(), l2.Value()}, got)
		_, err = sb.TryAcquire(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken, "a third holder of two permits")
		require.NoError(t, l1.Extend(ctx))

		step := locktest.NewStepper(ctx)
		waiting, err := locktest.NewSem(b, key, 2, step.Option())
		require.NoError(t, err)
		acquired := refusedOnce(ctx, t, step, waiting.Acquire)
		require.NoError(t, l1.Release(ctx))
		step.Next <- struct{}{}
		l3, err := acquired()
		require.NoError(t, err, "the waiting Acquire gets the released permit")
		got, err = node.ZRange(ctx, full, 0, -1).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{l2.Value(), l3.Value()}, got)
		require.NoError(t, l2.Release(ctx))
		require.NoError(t, l3.Release(ctx))
		n, err := node.Exists(ctx, full).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing left")
	})
}
