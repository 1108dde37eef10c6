package locktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// everywhere64 is n copies of v.
func everywhere64(n int, v int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// waitExpired waits (bounded) until the reader value v's expiry has come on
// every node that records it, by the node's own clock.
func waitExpired(t *testing.T, clients []redis.UniversalClient, key, v string) {
	t.Helper()
	require.Eventually(t, func() bool { return expiredEverywhere(t, clients, ReadersKey(key), v) },
		10*time.Second, 10*time.Millisecond)
}

// longAndShortReader takes a reader on key with the long TTL and then one
// with the short TTL (which a test lets run out), and returns them with the
// long TTL's lock for later attempts.
func longAndShortReader(ctx context.Context, t *testing.T, c *redlock.Client, key string) (long *RW, a, b *redlock.Lease) {
	t.Helper()
	long = rwm(t, c, key)
	a, b = tryR(ctx, t, long), tryR(ctx, t, rwm(t, c, key, rwShort()...))
	require.NotNil(t, a)
	require.NotNil(t, b)
	return long, a, b
}

// Of two readers, one releases at once and the other crashes (never
// releases, never extends). Until the crashed reader's TTL runs out on the
// nodes the writer is refused; then the first attempt of a plain Mutex, and
// then of the writer, succeeds: the key ends with its last reader, not with
// the longest TTL it saw.
func rwCrashedReader(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	long, a, crashed := longAndShortReader(ctx, t, c, key)
	require.NoError(t, a.Release(ctx))
	assert.Nil(t, tryW(ctx, t, long), "the crashed reader still holds")
	<-crashed.Done() // its validity ran out; its record ends at its TTL on the nodes
	waitExpired(t, clients, key, crashed.Value())
	admits(ctx, t, mutex(t, c, key).TryLock, "a plain Mutex at the first attempt after the crashed reader's TTL")
	admits(ctx, t, long.TryLock, "the writer at the first attempt after the crashed reader's TTL")
}

// A reader with a shorter TTL, arriving after one with a longer TTL, does
// not cut the longer one's record short: once the short one has expired,
// the writer and a plain Mutex are still refused and the long one extends.
// The next reader's acquire drops the expired one from every node.
func rwShorterReader(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	long, a, b := longAndShortReader(ctx, t, c, key)
	<-b.Done()
	waitExpired(t, clients, key, b.Value())
	next := tryR(ctx, t, long) // the first script to run since b expired
	require.NotNil(t, next)
	landed(t, func() bool { return recordedQuiet(clients, key, next.Value()) == k.Nodes }, "the next reader on every node")
	assert.Zero(t, recordedOn(t, clients, key, b.Value()), "the expired reader is dropped")
	assert.Equal(t, everywhere64(k.Nodes, 2), readersOn(t, clients, key))
	require.NoError(t, next.Release(ctx))
	assert.Nil(t, tryW(ctx, t, long), "the long reader still holds")
	_, err := mutex(t, c, key).TryLock(ctx)
	assert.ErrorIs(t, err, redlock.ErrNotAcquired, "a plain Mutex too")
	require.NoError(t, a.Extend(ctx))
	assert.Equal(t, k.Nodes, recordedOn(t, clients, key, a.Value()))
	require.NoError(t, a.Release(ctx))
}

// Extend never brings back a lease the nodes no longer hold: a reader whose
// record was removed, or whose expiry has come by the nodes' clocks while
// another reader keeps the set alive, and a writer whose key was deleted or
// now holds the readers' flag. Each Extend reports ErrLost and writes
// nothing back.
func rwExtendNeverRevives(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	rk := ReadersKey(key)

	removed, expired, other := tryR(ctx, t, rw), tryR(ctx, t, rw), tryR(ctx, t, rw)
	for _, l := range []*redlock.Lease{removed, expired, other} {
		require.NotNil(t, l)
		landed(t, func() bool { return recordedQuiet(clients, key, l.Value()) == k.Nodes }, "the reader on every node")
	}
	planted := make([]float64, len(clients)) // the expired reader's score on each node
	for i, cl := range clients {
		require.NoError(t, cl.ZRem(ctx, rk, removed.Value()).Err())
		now, err := cl.Time(ctx).Result()
		require.NoError(t, err)
		planted[i] = float64(now.UnixMilli() - 1)
		require.NoError(t, cl.ZAdd(ctx, rk, redis.Z{Score: planted[i], Member: expired.Value()}).Err())
	}
	for name, l := range map[string]*redlock.Lease{"removed": removed, "expired": expired} {
		require.ErrorIs(t, l.Extend(ctx), redlock.ErrLost, name)
		assert.ErrorIs(t, l.Err(), redlock.ErrLost, name)
	}
	// Extend returns once a majority has answered; a node's script may run
	// later or, past the per-node timeout, never. So a node may still hold
	// the expired reader as planted, but none may hold either reader with
	// any other score: that would be a re-add.
	for i, cl := range clients {
		_, err := cl.ZScore(ctx, rk, removed.Value()).Result()
		assert.ErrorIs(t, err, redis.Nil, "removed: Extend re-added the reader on node %d", i)
		score, err := cl.ZScore(ctx, rk, expired.Value()).Result()
		if !errors.Is(err, redis.Nil) {
			require.NoError(t, err, "node %d", i)
			assert.Equal(t, planted[i], score, "expired: Extend re-added the reader on node %d", i)
		}
	}
	require.NoError(t, other.Extend(ctx), "the other reader is untouched")
	require.NoError(t, other.Release(ctx))

	w := tryW(ctx, t, rw)
	require.NotNil(t, w)
	landed(t, func() bool { return count(holdersQuiet(clients, key), w.Value()) == k.Nodes }, "the writer on every node")
	for _, cl := range clients {
		require.NoError(t, cl.Del(ctx, key).Err())
	}
	require.ErrorIs(t, w.Extend(ctx), redlock.ErrLost)
	assert.Equal(t, everywhere(clients, ""), holders(t, clients, key), "Extend re-created the writer's key")

	w = tryW(ctx, t, rw)
	require.NotNil(t, w)
	landed(t, func() bool { return count(holdersQuiet(clients, key), w.Value()) == k.Nodes }, "the writer on every node")
	for _, cl := range clients {
		require.NoError(t, cl.Set(ctx, key, readersFlag, time.Minute).Err())
	}
	require.ErrorIs(t, w.Extend(ctx), redlock.ErrLost)
	assert.Equal(t, everywhere(clients, readersFlag), holders(t, clients, key))
}

// The lifecycle of both leases: RDo holds a read lease while fn runs
// (another reader shares it, a writer is refused); Do holds the write lease
// (a reader is refused) and leaves nothing after; Context ends with
// ErrReleased; a second Release says ErrReleased; a lease whose validity
// runs out closes Done with ErrLost.
func rwLifecycle(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	ran := 0
	require.NoError(t, rw.RDo(ctx, func(ctx context.Context, l *redlock.Lease) error {
		ran++
		assert.NoError(t, l.Err())
		other := tryR(ctx, t, rw)
		if assert.NotNil(t, other, "readers share") {
			assert.NoError(t, other.Release(ctx))
		}
		assert.Nil(t, tryW(ctx, t, rw), "no writer while RDo's fn runs")
		return nil
	}))
	require.NoError(t, rw.Do(ctx, func(ctx context.Context, l *redlock.Lease) error {
		ran++
		assert.GreaterOrEqual(t, count(holders(t, clients, key), l.Value()), k.quorum())
		assert.Nil(t, tryR(ctx, t, rw), "no reader while Do's fn runs")
		return nil
	}))
	assert.Equal(t, 2, ran)
	landedEverywhere(t, clients, key, "", "released")

	for _, take := range []attempt{rw.TryRLock, rw.TryLock} {
		l, err := take(ctx)
		require.NoError(t, err)
		lctx, cancel := l.Context(ctx)
		require.NoError(t, l.Extend(ctx))
		require.NoError(t, l.Release(ctx))
		<-lctx.Done()
		cancel()
		assert.ErrorIs(t, context.Cause(lctx), redlock.ErrReleased)
		assert.ErrorIs(t, l.Release(ctx), redlock.ErrReleased)
		assert.ErrorIs(t, l.Extend(ctx), redlock.ErrReleased)
	}
	landedEverywhere(t, clients, key, "", "released")
	landed(t, func() bool { return slices.Equal(make([]int64, k.Nodes), readersOn(t, clients, key)) }, "no reader left")

	short := rwm(t, c, key, rwShort()...)
	for _, take := range []attempt{short.TryRLock, short.TryLock} {
		l, err := take(ctx)
		require.NoError(t, err)
		<-l.Done()
		assert.ErrorIs(t, l.Err(), redlock.ErrLost)
		assert.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	}
}

// KeepAlive keeps a short read lease (and then a write lease) past several
// TTLs: its ValidUntil moves on, it stays recorded, and it excludes the
// other mode throughout; it ends when its context does.
func rwKeepAlive(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key, rwShort()...)
	for _, mode := range []struct {
		take, other attempt
	}{{rw.TryRLock, rw.TryLock}, {rw.TryLock, rw.TryRLock}} {
		l, err := mode.take(ctx)
		require.NoError(t, err)
		first := l.ValidUntil()
		kctx, stop := context.WithCancel(ctx)
		kept := make(chan error, 1)
		go func() { kept <- l.KeepAlive(kctx) }()
		require.Eventually(t, func() bool { return l.ValidUntil().After(first.Add(3 * shortTTL)) },
			10*time.Second, 10*time.Millisecond, "KeepAlive extends past three TTLs")
		require.NoError(t, l.Err())
		_, err = mode.other(ctx)
		assert.ErrorIs(t, err, redlock.ErrNotAcquired, "the other mode is still excluded")
		stop()
		assert.ErrorIs(t, <-kept, context.Canceled)
		require.NoError(t, l.Release(ctx))
	}
	landedEverywhere(t, clients, key, "", "released")
}

// With fencing, writers get tokens that increase with every acquisition of
// the key, by a writer or by a plain fenced Mutex on it (the fence hash is
// the key's); Extend keeps the token; readers get none. With the clock
// floor off the counters alone must order them.
func rwTokens(t *testing.T, k Kind) {
	for _, floor := range []bool{true, false} {
		t.Run(map[bool]string{true: "ClockFloor", false: "CounterOnly"}[floor], func(t *testing.T) {
			o := []redlock.Option{redlock.WithFencing()}
			if !floor {
				o = append(o, k.withoutClockFloor(t))
			}
			ctx, clients, c, key := rwFresh(t, k, o...)
			rw, plain := rwm(t, c, key), mutex(t, c, key)
			var last fencing.Token
			for i, a := range []struct {
				take   attempt
				reader bool
			}{{rw.TryLock, false}, {plain.TryLock, false}, {rw.TryRLock, true}, {rw.TryLock, false}, {rw.Lock, false}} {
				l, err := a.take(ctx)
				require.NoError(t, err, "acquisition %d", i)
				if a.reader {
					assert.Zero(t, l.Token(), "a reader gets no token")
					assert.Nil(t, l.Tokens())
				} else {
					assert.Greater(t, l.Token(), last, "acquisition %d", i)
					last = l.Token()
					require.NoError(t, l.Extend(ctx))
					assert.Equal(t, last, l.Token(), "Extend keeps the token")
				}
				require.NoError(t, l.Release(ctx))
			}
			n := 0
			for _, cl := range clients {
				got, err := cl.HGet(ctx, FenceKey(key), "t").Uint64()
				if err == nil && fencing.Token(got) == last {
					n++
				}
			}
			assert.GreaterOrEqual(t, n, k.quorum(), "a majority of fence hashes hold the last token")
		})
	}
}

func rwBadInput(t *testing.T, k Kind) {
	_, _, c, key := rwFresh(t, k, redlock.WithKeyPrefix("p:"))
	for name, f := range map[string]func() error{
		"EmptyKey":  func() error { _, err := NewRW(c, ""); return err },
		"MarkerKey": func() error { _, err := NewRW(c, "redfence:node", redlock.WithKeyPrefix("")); return err },
		"ReadersKey": func() error {
			_, err := NewRW(c, ReadersKey("p:"+key), redlock.WithKeyPrefix(""))
			return err
		},
		"IntentKey": func() error { _, err := NewRW(c, "{p:"+key+"}:rw:intent", redlock.WithKeyPrefix("")); return err },
		"ReadersKeyPlain": func() error {
			_, err := c.NewMutex(ReadersKey("p:"+key), redlock.WithKeyPrefix(""))
			return err
		},
		"FenceKey": func() error {
			_, err := NewRW(c, FenceKey("p:"+key), redlock.WithKeyPrefix(""))
			return err
		},
		"NegativeTTL": func() error { _, err := NewRW(c, key, redlock.WithTTL(-time.Second)); return err },
		"NilRetry":    func() error { _, err := NewRW(c, key, redlock.WithRetry(nil)); return err },
		"NodeTimeout": func() error { _, err := NewRW(c, key, redlock.WithNodeTimeout(longTTL)); return err },
	} {
		var ce *redlock.ConfigError
		err := f()
		assert.ErrorAs(t, err, &ce, name)
		assert.ErrorIs(t, err, redlock.ErrInvalid, name)
	}
	rw, err := NewRW(c, key)
	require.NoError(t, err)
	assert.Equal(t, "p:"+key, rw.Key())
	err = rw.Do(context.Background(), nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid, "Do with a nil fn")
	err = rw.RDo(context.Background(), nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid, "RDo with a nil fn")
	_, err = rw.TryRLock(nil) //nolint:staticcheck // a nil context is what is tested
	assert.ErrorIs(t, err, redlock.ErrInvalid, "a nil context")
}

// New, unvouched nodes refuse readers and writers with ErrQuarantined and
// record nothing; once vouched for, they admit both.
func rwQuarantine(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.unvouched(t, clients, opts(k.quarantineOn(), rwLong())...)
	rw := rwm(t, c, redistest.Key(t))
	for name, take := range map[string]attempt{"read": rw.TryRLock, "write": rw.TryLock} {
		_, err := take(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, name)
		assert.ErrorIs(t, err, redlock.ErrQuarantined, name)
	}
	assert.Equal(t, everywhere(clients, ""), holders(t, clients, rw.Key()))
	assert.Equal(t, make([]int64, k.Nodes), readersOn(t, clients, rw.Key()))
	require.NoError(t, c.Vouch(ctx))
	admits(ctx, t, rw.TryRLock)
	admits(ctx, t, rw.TryLock)
}
