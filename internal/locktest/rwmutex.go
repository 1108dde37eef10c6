package locktest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// RunRWMutex runs the tests of the read-write lock (NewRWMutex) for kind k;
// docs/shapes.md names them as the evidence of its guarantees.
func RunRWMutex(t *testing.T, k Kind) {
	if k.Nodes == 5 { // first: the redis clients of unreachable addresses wind down while the others run (goleak)
		runTests(t, k, []test[Kind]{
			{"QuorumSubsets", rwQuorumSubsets},
			{"MinorityReadersDoNotBlockWriter", rwMinorityReaders},
		})
	}
	runTests(t, k, rwTests)
}

// rwTests are the tests of a read-write lock on every kind.
var rwTests = []test[Kind]{
	{"ReadersShare", rwReadersShare},
	{"WriterExcludesReadersAndWriters", rwWriterExcludes},
	{"ReaderExcludesWriter", rwReaderExcludes},
	{"NeverWriterWithReaderUnderContention", rwContention},
	{"CrashedReaderFreesKeyAfterTTL", rwCrashedReader},
	{"ShorterReaderDoesNotCutLonger", rwShorterReader},
	{"ExtendNeverRevives", rwExtendNeverRevives},
	{"Lifecycle", rwLifecycle},
	{"KeepAlive", rwKeepAlive},
	{"WriterGetsInWhileReadersChurn", rwStarvationScripted},
	{"WriterGetsInWhileReaderGoroutinesChurn", rwStarvationChurn},
	{"LockGivingUpWithdrawsIntent", rwGiveUp},
	{"CloseDuringRLockAndLock", func(t *testing.T, k Kind) { closeDuringWait(t, k, closeRLock, closeLock) }},
	{"WriterTokensIncrease", rwTokens},
	{"BadInput", rwBadInput},
	{"RestartQuarantineApplies", rwQuarantine},
}

// rwFresh starts a read-write lock test: its context, the clients of fresh
// nodes, a Client of kind k with o (TTL longTTL unless o says otherwise) and
// a key of its own.
func rwFresh(t *testing.T, k Kind, o ...redlock.Option) (context.Context, []redis.UniversalClient, *redlock.Client, string) {
	t.Helper()
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.client(t, clients, opts(rwLong(), o)...)
	return ctxT(t), clients, c, redistest.Key(t)
}

// rwLong are the tests' Client options: a TTL that does not run out in a
// test, and a node timeout that a loaded machine does not reach.
func rwLong() []redlock.Option {
	return []redlock.Option{redlock.WithTTL(longTTL), redlock.WithNodeTimeout(time.Second)}
}

// shortTTL is the TTL of the leases that a test lets run out.
const shortTTL = 300 * time.Millisecond

// rwShort are the options of a lock whose leases a test lets run out.
func rwShort() []redlock.Option {
	return []redlock.Option{redlock.WithTTL(shortTTL), redlock.WithNodeTimeout(100 * time.Millisecond)}
}

// landed waits, bounded, until cond holds: an acquire returns once a
// majority has granted it, and its requests land on the other nodes a
// moment later.
func landed(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, msg)
}

// rwm returns c's read-write lock on key.
func rwm(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) *RW {
	t.Helper()
	rw, err := NewRW(c, key, o...)
	require.NoError(t, err)
	return rw
}

// readersOn returns, per node, the readers recorded for the read-write lock
// on the full key (expired or not).
func readersOn(t *testing.T, clients []redis.UniversalClient, key string) []int64 {
	t.Helper()
	out := make([]int64, len(clients))
	for i, c := range clients {
		n, err := c.ZCard(context.Background(), ReadersKey(key)).Result()
		require.NoError(t, err, "node %d", i)
		out[i] = n
	}
	return out
}

// recordedOn counts the nodes that record the reader value v.
func recordedOn(t *testing.T, clients []redis.UniversalClient, key, v string) int {
	t.Helper()
	n := 0
	for i, c := range clients {
		_, err := c.ZScore(context.Background(), ReadersKey(key), v).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err, "node %d", i)
		n++
	}
	return n
}

// recordedQuiet is recordedOn for goroutines other than the test's: a
// node's error counts as not recording v.
func recordedQuiet(clients []redis.UniversalClient, key, v string) int {
	n := 0
	for _, c := range clients {
		if _, err := c.ZScore(context.Background(), ReadersKey(key), v).Result(); err == nil {
			n++
		}
	}
	return n
}

const readersFlag = "redfence:readers"

// try makes one attempt with take, returning the lease or nil; a failure
// must be ErrNotAcquired.
func try(ctx context.Context, t *testing.T, take attempt) *redlock.Lease {
	t.Helper()
	l, err := take(ctx)
	if err != nil {
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		return nil
	}
	return l
}

// tryR and tryW make one read and one write attempt (see try).
func tryR(ctx context.Context, t *testing.T, rw *RW) *redlock.Lease {
	t.Helper()
	return try(ctx, t, rw.TryRLock)
}

func tryW(ctx context.Context, t *testing.T, rw *RW) *redlock.Lease {
	t.Helper()
	return try(ctx, t, rw.TryLock)
}

// admits requires take to get a lease at its first attempt, and releases
// it: the lock lets that mode in now.
func admits(ctx context.Context, t *testing.T, take attempt, msgAndArgs ...any) {
	t.Helper()
	l := try(ctx, t, take)
	require.NotNil(t, l, msgAndArgs...)
	require.NoError(t, l.Release(ctx))
}

// Three readers hold at once; every node records each of them and flags
// the lock key; when the last one leaves, nothing is left on any node.
func rwReadersShare(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	assert.Equal(t, key, rw.Key())
	var ls []*redlock.Lease
	for i := range 3 {
		l, err := rw.TryRLock(ctx)
		require.NoError(t, err, "reader %d", i)
		assert.Zero(t, l.Token(), "readers get no token")
		assert.Equal(t, key, l.Key())
		ls = append(ls, l)
	}
	for _, l := range ls {
		landed(t, func() bool { return recordedQuiet(clients, key, l.Value()) == k.Nodes }, "every node records each reader")
	}
	assert.Equal(t, everywhere(clients, readersFlag), holders(t, clients, key))
	require.NoError(t, ls[0].Release(ctx))
	// Release returns once a majority removed the reader; the rest land after.
	landed(t, func() bool { return recordedQuiet(clients, key, ls[0].Value()) == 0 }, "the released reader")
	for _, l := range ls[1:] {
		assert.Equal(t, k.Nodes, recordedOn(t, clients, key, l.Value()), "a release removes only its own reader")
	}
	assert.Nil(t, tryW(ctx, t, rw), "two readers still hold")
	for _, l := range ls[1:] {
		require.NoError(t, l.Release(ctx))
	}
	landedEverywhere(t, clients, key, "", "released")
	landed(t, func() bool { return slices.Equal(make([]int64, k.Nodes), readersOn(t, clients, key)) }, "no reader left")
}

// A writer holds alone: a reader, another writer (Lock with a deadline
// too) and a plain Mutex on the key are refused, and leave nothing; once
// it releases, a reader gets in.
func rwWriterExcludes(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	w, err := rw.TryLock(ctx)
	require.NoError(t, err)
	landed(t, func() bool { return count(holdersQuiet(clients, key), w.Value()) == k.Nodes }, "the writer on every node")

	_, err = rw.TryRLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrTaken)
	assert.Nil(t, tryW(ctx, t, rw), "a second writer")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = rwm(t, c, key).Lock(short)
	cancel()
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a waiting writer")
	_, err = mutex(t, c, key).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a plain Mutex on the key")
	assert.Equal(t, everywhere(clients, w.Value()), holders(t, clients, key), "the refused leave the writer's key")
	assert.Equal(t, make([]int64, k.Nodes), readersOn(t, clients, key), "no reader recorded")

	require.NoError(t, w.Release(ctx))
	admits(ctx, t, rw.TryRLock, "a reader after the writer released")
}

// A reader holds: a writer and a plain Mutex are refused (and leave the
// reader's records alone); once it releases, the writer and then the plain
// Mutex get in, and a plain holder excludes readers.
func rwReaderExcludes(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	plain := mutex(t, c, key)
	r := tryR(ctx, t, rw)
	require.NotNil(t, r)
	landed(t, func() bool { return recordedQuiet(clients, key, r.Value()) == k.Nodes }, "the reader on every node")
	_, err := rw.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrTaken)
	assert.Contains(t, err.Error(), "held by readers")
	_, err = plain.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a plain Mutex while a reader holds")
	assert.Equal(t, k.Nodes, recordedOn(t, clients, key, r.Value()))
	assert.Equal(t, everywhere(clients, readersFlag), holders(t, clients, key))
	require.NoError(t, r.Extend(ctx), "the reader still holds")
	require.NoError(t, r.Release(ctx))

	admits(ctx, t, rw.TryLock, "the writer after the reader released")
	p, err := plain.TryLock(ctx)
	require.NoError(t, err)
	landed(t, func() bool { return count(holdersQuiet(clients, key), p.Value()) == k.Nodes }, "the plain holder on every node")
	assert.Nil(t, tryR(ctx, t, rw), "a reader while a plain Mutex holds")
	assert.Equal(t, everywhere(clients, p.Value()), holders(t, clients, key))
	require.NoError(t, p.Release(ctx))
}

// Readers (from RLock) and writers (from Lock) contend from goroutines on
// two Clients: a writer never holds with a reader or another writer (shared
// counters), and while each holds, a majority of nodes record it.
func rwContention(t *testing.T, k Kind) {
	const readers, writers, rounds = 4, 2, 6
	ctx, clients, c1, key := rwFresh(t, k)
	c2 := k.client(t, clients, rwLong()...)
	fast := redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) })
	var mu sync.Mutex
	in := struct{ r, w, most int }{}
	var bad []string
	enter := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			in.w++
		} else {
			in.r++
		}
		in.most = max(in.most, in.r)
		if in.w > 1 || in.w > 0 && in.r > 0 {
			bad = append(bad, "a writer with another holder")
		}
	}
	leave := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			in.w--
		} else {
			in.r--
		}
	}
	done := make(chan struct{}, readers+writers)
	for g := range readers + writers {
		c := c1
		if g%2 == 1 {
			c = c2
		}
		rw, write := rwm(t, c, key, fast), g >= readers
		go func() {
			defer func() { done <- struct{}{} }()
			for range rounds {
				lock := rw.RLock
				if write {
					lock = rw.Lock
				}
				l, err := lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				enter(write)
				if write {
					assert.GreaterOrEqual(t, count(holdersQuiet(clients, key), l.Value()), k.quorum(), "the writer on a majority")
				} else {
					assert.GreaterOrEqual(t, recordedQuiet(clients, key, l.Value()), k.quorum(), "the reader on a majority")
				}
				leave(write)
				assert.NoError(t, l.Release(ctx))
			}
		}()
	}
	for range readers + writers {
		<-done
	}
	assert.Empty(t, bad)
	t.Logf("at most %d readers at once", in.most)
}

// quorum is the majority of the kind's nodes.
func (k Kind) quorum() int { return k.Nodes/2 + 1 }
