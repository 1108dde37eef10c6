package redlock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// The read-write lock's scripts on one node, with crafted states: what each
// admits and refuses, what it leaves on the node (the lock key's READERS
// flag, the readers' expiries, the intent marker).
func TestRWScripts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, clients := testEngine(t, "single", 1, WithTTL(10*time.Second))
	node := clients[0]
	w, r, err := e.NewRWMutex(redistest.Key(t))
	require.NoError(t, err)
	key, readers, intent := w.Key(), keys.ReadersOf(w.Key()), keys.Intent(w.Key())
	assert.Equal(t, "{"+key+"}:rw:readers", readers)

	send := func(args []any) *redis.Cmd {
		cmd := redis.NewCmd(ctx, args...)
		_ = node.Process(ctx, cmd)
		retryScript(ctx, redisconn.GoRedis(node), cmd)
		return cmd
	}
	rlock := func(v string) error { _, err := decodeRW(send(withValue(r.acquireTmpl, v))); return err }
	tryLock := func(v string) error { _, err := decodeRW(send(withValue(w.try.acquireTmpl, v))); return err }
	waitLock := func(v string) error { _, err := decodeRW(send(withValue(w.acquireTmpl, v))); return err }
	rextend := func(v string) int64 { n, _ := send(withValue(r.extendTmpl, v)).Int64(); return n }
	runlock := func(v string) int64 { n, _ := send(withValue(r.releaseTmpl, v)).Int64(); return n }
	nowMs := func() int64 { tm, err := node.Time(ctx).Result(); require.NoError(t, err); return tm.UnixMilli() }
	get := func(k string) string { v, _ := node.Get(ctx, k).Result(); return v }
	score := func(v string) float64 { s, _ := node.ZScore(ctx, readers, v).Result(); return s }
	clean := func() { require.NoError(t, node.Del(ctx, key, readers, intent).Err()) }

	t.Run("ReaderFlagsTheKeyUntilTheLastExpiry", func(t *testing.T) {
		defer clean()
		require.NoError(t, rlock("r1"))
		require.NoError(t, rlock("r2"))
		assert.Equal(t, "redfence:readers", get(key))
		at, err := node.PExpireTime(ctx, key).Result()
		require.NoError(t, err)
		assert.InDelta(t, score("r2"), float64(at.Milliseconds()), 0, "the flag ends with the last reader")
		rat, err := node.PExpireTime(ctx, readers).Result()
		require.NoError(t, err)
		assert.Equal(t, at, rat)
		// A reader whose expiry is shorter does not cut the flag short.
		require.NoError(t, node.ZAdd(ctx, readers, redis.Z{Score: float64(nowMs() + 60_000), Member: "long"}).Err())
		require.NoError(t, rlock("r3"))
		at, _ = node.PExpireTime(ctx, key).Result()
		assert.InDelta(t, score("long"), float64(at.Milliseconds()), 0)
		require.EqualValues(t, 1, runlock("long"))
		at, _ = node.PExpireTime(ctx, key).Result()
		assert.InDelta(t, score("r3"), float64(at.Milliseconds()), 0, "a release shortens the flag to the last reader left")
		for _, v := range []string{"r1", "r2", "r3"} {
			require.EqualValues(t, 1, runlock(v), v)
		}
		assert.Zero(t, node.Exists(ctx, key, readers).Val(), "the last release deletes the flag and the set")
	})
	t.Run("WriterExcludesReaders", func(t *testing.T) {
		defer clean()
		require.NoError(t, tryLock("w"))
		assert.Equal(t, "w", get(key))
		assert.ErrorIs(t, rlock("r"), ErrTaken)
		assert.Zero(t, node.Exists(ctx, readers).Val(), "the refused reader is not recorded")
	})
	t.Run("ReadersExcludeWriterWhichLeavesIntentWhenWaiting", func(t *testing.T) {
		defer clean()
		require.NoError(t, rlock("r"))
		err := tryLock("w")
		assert.ErrorIs(t, err, ErrTaken)
		assert.ErrorIs(t, err, errReadersHold)
		assert.Zero(t, node.Exists(ctx, intent).Val(), "TryLock leaves no intent")
		assert.ErrorIs(t, waitLock("w"), errReadersHold)
		ttl, err := node.PTTL(ctx, intent).Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(10*time.Second), float64(ttl), float64(time.Second), "the intent lasts a TTL")
		assert.ErrorIs(t, rlock("r2"), errWriterWaits, "the intent holds a new reader back")
		require.NoError(t, rlock("r"), "a repeated request of a reader already in is not a new reader")
		require.EqualValues(t, 1, rextend("r"), "a reader already in extends")
		require.EqualValues(t, 1, runlock("r"))
		require.NoError(t, tryLock("w"))
		assert.Zero(t, node.Exists(ctx, intent).Val(), "the granted writer deletes the intent")
		assert.Equal(t, "w", get(key))
	})
	t.Run("WriterDropsExpiredReaders", func(t *testing.T) {
		defer clean()
		// A reader whose expiry has come, in a set and under a flag that
		// would outlive it: only the writer's own purge can let it in.
		require.NoError(t, node.ZAdd(ctx, readers, redis.Z{Score: float64(nowMs() - 1), Member: "gone"}).Err())
		require.NoError(t, node.PExpire(ctx, readers, time.Minute).Err())
		require.NoError(t, node.Set(ctx, key, "redfence:readers", time.Minute).Err())
		require.NoError(t, tryLock("w"))
		assert.Equal(t, "w", get(key))
		assert.Zero(t, node.Exists(ctx, readers).Val())
	})
	t.Run("ExtendNeverRevivesAnExpiredReader", func(t *testing.T) {
		defer clean()
		require.NoError(t, rlock("live"))
		require.NoError(t, node.ZAdd(ctx, readers, redis.Z{Score: float64(nowMs() - 1), Member: "gone"}).Err())
		assert.Zero(t, rextend("gone"))
		_, err := node.ZScore(ctx, readers, "gone").Result()
		assert.True(t, errors.Is(err, redis.Nil), "the expired reader is not re-added: %v", err)
		assert.Zero(t, rextend("never"), "nor a reader never recorded")
		assert.Zero(t, runlock("gone"))
	})
	t.Run("PlainHolderExcludesReaders", func(t *testing.T) {
		defer clean()
		require.NoError(t, node.Set(ctx, key, "plain", time.Minute).Err())
		assert.ErrorIs(t, rlock("r"), ErrTaken)
		assert.Equal(t, "plain", get(key), "the reader leaves the plain holder's key alone")
		assert.ErrorIs(t, tryLock("w"), ErrTaken)
	})
	t.Run("Status", func(t *testing.T) {
		for st, want := range map[int64]error{0: ErrTaken, 2: errReadersHold, 3: errWriterWaits} {
			cmd := redis.NewCmd(ctx)
			cmd.SetVal([]any{st, int64(0)})
			_, err := decodeRW(cmd)
			assert.ErrorIs(t, err, want, strconv.FormatInt(st, 10))
		}
	})
}

// A waiting writer's retry policy is capped at most between attempts, so
// that its intent marker (one TTL) does not lapse; Stop and a nil policy
// pass through.
func TestCapRetry(t *testing.T) {
	const most = 10 * time.Millisecond
	long := capRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }, most)()
	assert.Equal(t, most, long.NextBackOff())
	short := capRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }, most)()
	assert.Equal(t, time.Millisecond, short.NextBackOff())
	stop := capRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }, most)()
	assert.Equal(t, backoff.Stop, stop.NextBackOff())
	assert.Nil(t, capRetry(func() backoff.BackOff { return nil }, most)())
}
