package locktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// RunMultiKey runs the tests of the multi-key lock (NewMultiMutex) for kind
// k; docs/shapes.md names them as the evidence of its guarantees.
func RunMultiKey(t *testing.T, k Kind) {
	runTests(t, k, multiKeyTests)
	if k.Nodes > 1 {
		t.Run("MinorityHoldsOneKey", func(t *testing.T) { multiMinority(t, k) })
	}
}

// multiKeyTests are the tests of a multi-key lock on every kind.
var multiKeyTests = []test[Kind]{
	{"AllOrNone", multiAllOrNone},
	{"OverlappingSetsNeverBothHold", multiOverlapping},
	{"ExtendAfterKeyLossEndsLease", multiExtendAfterKeyLoss},
	{"ReleaseDeletesOnlyOurKeys", multiReleaseOnlyOurs},
	{"TokensPerKey", multiTokens},
	{"TokensIncreaseUnderContention", multiTokensUnderContention},
	{"TokensAfterFenceLoss", multiTokensAfterFenceLoss},
	{"BadInput", multiBadInput},
	{"RestartQuarantineApplies", multiQuarantine},
}

// multiFresh starts a multi-key test: its context, the clients of fresh
// nodes, a Client of kind k with o, and n keys of its own.
func multiFresh(t *testing.T, k Kind, n int, o ...redlock.Option) (context.Context, []redis.UniversalClient, *redlock.Client, []string) {
	t.Helper()
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.client(t, clients, opts(o, []redlock.Option{redlock.WithTTL(longTTL)})...)
	base := redistest.Key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%c", base, 'a'+i)
	}
	return ctxT(t), clients, c, keys
}

// multi returns c's multi-key mutex for keys.
func multi(t *testing.T, c *redlock.Client, keys []string, o ...redlock.Option) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMultiMutex(keys, o...)
	require.NoError(t, err)
	return m
}

// everywhere returns v once per node.
func everywhere(clients []redis.UniversalClient, v string) []string {
	out := make([]string, len(clients))
	for i := range out {
		out[i] = v
	}
	return out
}

// landedEverywhere waits, bounded, until every node holds v at key: an
// acquire returns once a majority granted it, and its last writes land a
// moment later.
func landedEverywhere(t *testing.T, clients []redis.UniversalClient, key, v, msg string) {
	t.Helper()
	landed(t, func() bool { return slices.Equal(holdersQuiet(clients, key), everywhere(clients, v)) }, msg)
}

// A multi-key lock takes every key or none: one key held by a plain lock
// leaves the others untouched on every node; once it is free, every key holds
// the lease's value on every node, and a plain lock on one of them, or
// another multi-key lock that overlaps, is refused and leaves nothing.
func multiAllOrNone(t *testing.T, k Kind) {
	ctx, clients, c, keys := multiFresh(t, k, 4)
	a, b, cc, d := keys[0], keys[1], keys[2], keys[3]
	none := everywhere(clients, "")
	plain := mutex(t, c, b)
	held := take(ctx, t, plain)
	landedEverywhere(t, clients, b, held.Value(), "the plain lock's key on every node")

	m := multi(t, c, []string{a, b, cc})
	assert.Equal(t, []string{a, b, cc}, m.Keys())
	l, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrTaken)
	assert.Nil(t, l)
	assert.Equal(t, none, holders(t, clients, a), "nothing of the failed multi-key acquire is left")
	assert.Equal(t, none, holders(t, clients, cc), "nothing of the failed multi-key acquire is left")
	assert.Equal(t, everywhere(clients, held.Value()), holders(t, clients, b), "the plain lock keeps its key")
	require.NoError(t, held.Release(ctx))

	l = take(ctx, t, m)
	assert.Equal(t, []string{a, b, cc}, m.Keys())
	for _, key := range m.Keys() {
		landedEverywhere(t, clients, key, l.Value(), key)
	}
	_, err = plain.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "a plain lock on one of the keys is refused")
	_, err = multi(t, c, []string{d, cc}).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "an overlapping multi-key lock is refused")
	assert.Equal(t, none, holders(t, clients, d), "nothing of the overlapping acquire is left")
	require.NoError(t, l.Release(ctx))
	for _, key := range keys {
		landedEverywhere(t, clients, key, "", "released: "+key)
	}
}

// Multi-key locks over overlapping key sets, and a plain lock on one of the
// keys, contend from many goroutines on two Clients: no key ever has two
// holders at once (a shared counter per key), and while a holder holds, a
// majority of nodes store its value at every one of its keys.
func multiOverlapping(t *testing.T, k Kind) {
	ctx, clients, c1, keys := multiFresh(t, k, 3)
	c2 := k.client(t, clients, redlock.WithTTL(longTTL))
	a, b, cc := keys[0], keys[1], keys[2]
	sets := [][]string{{a, b}, {b, cc}, {cc, a}, {a, b, cc}, {b}, {cc, b}}
	const rounds = 6
	fast := redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) })
	in := map[string]*atomic.Int32{a: {}, b: {}, cc: {}}
	var overlaps, notOnNodes, held atomic.Int32
	var wg sync.WaitGroup
	for i, set := range sets {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		m := multi(t, c, set, fast)
		wg.Go(func() {
			for range rounds {
				l, err := m.Lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				held.Add(1)
				for _, key := range set {
					if in[key].Add(1) != 1 {
						overlaps.Add(1)
					}
				}
				for _, key := range set {
					if count(holdersQuiet(clients, key), l.Value()) < majority(len(clients)) {
						notOnNodes.Add(1)
					}
				}
				for _, key := range set {
					in[key].Add(-1)
				}
				assert.NoError(t, l.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(len(sets)*rounds), held.Load(), "every holder got its turns")
	assert.Zero(t, overlaps.Load(), "two holders of one key at once")
	assert.Zero(t, notOnNodes.Load(), "a holder's value missing from a majority of nodes")
}

// holdersQuiet is holders for goroutines: a node that cannot be read counts
// as not holding.
func holdersQuiet(clients []redis.UniversalClient, key string) []string {
	out := make([]string, len(clients))
	for i, c := range clients {
		out[i], _ = c.Get(context.Background(), key).Result()
	}
	return out
}

// Extend after one key was deleted on every node fails with ErrLost, ends the
// lease and does not re-create the key; Release then deletes the others.
func multiExtendAfterKeyLoss(t *testing.T, k Kind) {
	ctx, clients, c, keys := multiFresh(t, k, 3)
	l := take(ctx, t, multi(t, c, keys))
	// The acquire returns at a quorum: wait for the rest, or a straggling
	// SET would land after the deletion below and look re-created.
	for _, key := range keys {
		landedEverywhere(t, clients, key, l.Value(), "the acquire landed on every node")
	}
	for _, n := range clients {
		require.NoError(t, n.Del(ctx, keys[1]).Err())
	}
	err := l.Extend(ctx)
	require.ErrorIs(t, err, redlock.ErrLost)
	assert.ErrorIs(t, l.Err(), redlock.ErrLost)
	assert.Equal(t, everywhere(clients, ""), holders(t, clients, keys[1]), "Extend never re-creates a missing key")
	assert.Equal(t, everywhere(clients, l.Value()), holders(t, clients, keys[0]), "the other keys stay until Release")
	require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	for _, key := range keys {
		landedEverywhere(t, clients, key, "", key)
	}
}

// Release deletes the keys that hold the lease's value and no other: a key
// that another owner took since (here, written over on every node) keeps its
// value, and the release reports the lease as lost.
func multiReleaseOnlyOurs(t *testing.T, k Kind) {
	ctx, clients, c, keys := multiFresh(t, k, 3)
	l := take(ctx, t, multi(t, c, keys))
	for _, n := range clients {
		require.NoError(t, n.Set(ctx, keys[1], "other", time.Minute).Err())
	}
	require.ErrorIs(t, l.Release(ctx), redlock.ErrLost)
	landedEverywhere(t, clients, keys[0], "", "released")
	landedEverywhere(t, clients, keys[2], "", "released")
	assert.Equal(t, everywhere(clients, "other"), holders(t, clients, keys[1]), "another owner's key is never deleted")
}

// With fencing, a multi-key lease has a token per key, and each key's tokens
// increase across holders, multi-key and plain alike; Extend keeps them. With
// one node each key gets its own token in the acquire; over several nodes
// phase 2 gives every key the one token a majority acknowledged for all.
// Without the clock floor the counters alone must do it.
func multiTokens(t *testing.T, k Kind) {
	k.eachClockFloor(t, func(t *testing.T, _ bool, o []redlock.Option) { multiTokensOnce(t, k, o) })
}

func multiTokensOnce(t *testing.T, k Kind, fenced []redlock.Option) {
	ctx, clients, c, keys := multiFresh(t, k, 2)
	m := multi(t, c, keys, fenced...)
	l1 := take(ctx, t, m)
	t1 := l1.Tokens()
	require.Len(t, t1, 2)
	assert.Positive(t, t1[0])
	assert.Positive(t, t1[1])
	assert.Equal(t, t1[0], l1.Token(), "Token is the first key's")
	require.NoError(t, l1.Extend(ctx))
	assert.Equal(t, t1, l1.Tokens(), "Extend keeps the tokens")
	require.NoError(t, l1.Release(ctx))

	p := take(ctx, t, mutex(t, c, keys[1], fenced...))
	assert.Greater(t, p.Token(), t1[1], "a plain lock's token is above the multi-key lease's for its key")
	require.NoError(t, p.Release(ctx))

	l2 := take(ctx, t, m)
	t2 := l2.Tokens()
	assert.Greater(t, t2[0], t1[0])
	assert.Greater(t, t2[1], p.Token(), "the next multi-key lease's token is above the plain lock's")
	recorded := 0
	for _, n := range clients {
		if got, err := n.HGet(ctx, FenceKey(keys[1]), "t").Uint64(); err == nil && got == uint64(t2[1]) {
			recorded++
		}
	}
	assert.GreaterOrEqual(t, recorded, majority(len(clients)), "a majority of fence hashes hold the key's last token")
	require.NoError(t, l2.Release(ctx))

	unfenced := take(ctx, t, multi(t, c, keys))
	assert.Nil(t, unfenced.Tokens(), "no tokens without fencing")
	assert.Zero(t, unfenced.Token())
	require.NoError(t, unfenced.Release(ctx))
}

// Fenced multi-key locks over overlapping sets and a fenced plain lock
// contend from many goroutines: each key's tokens, in the order its holders
// held it (holds of one key never overlap), strictly increase.
func multiTokensUnderContention(t *testing.T, k Kind) {
	ctx, clients, c1, keys := multiFresh(t, k, 3)
	c2 := k.client(t, clients, redlock.WithTTL(longTTL))
	a, b, cc := keys[0], keys[1], keys[2]
	sets := [][]string{{a, b}, {b, cc}, {cc, a}, {a, b, cc}, {b}}
	fast := redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) })
	var mu sync.Mutex
	seen := map[string][]fencing.Token{}
	var wg sync.WaitGroup
	for i, set := range sets {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		m := multi(t, c, set, fast, redlock.WithFencing())
		wg.Go(func() {
			for range 5 {
				l, err := m.Lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				for j, key := range m.Keys() {
					seen[key] = append(seen[key], l.Tokens()[j])
				}
				mu.Unlock()
				assert.NoError(t, l.Release(ctx))
			}
		})
	}
	wg.Wait()
	for _, key := range keys {
		ts := seen[key]
		assert.NotEmpty(t, ts, key)
		for i := 1; i < len(ts); i++ {
			assert.Greater(t, ts[i], ts[i-1], "%s: token %d of %v", key, i, ts)
		}
	}
}

// Every fence hash deleted on every node (lost, or expired): the next
// multi-key lease's tokens are still above the last ones, from the nodes'
// clocks (the clock floor). Without the floor (the control) they start over.
func multiTokensAfterFenceLoss(t *testing.T, k Kind) {
	k.eachClockFloor(t, func(t *testing.T, floor bool, o []redlock.Option) {
		ctx, clients, c, keys := multiFresh(t, k, 2)
		m := multi(t, c, keys, o...)
		var last []fencing.Token
		for range 3 { // counter-only tokens climb above 1
			l := take(ctx, t, m)
			last = l.Tokens()
			require.NoError(t, l.Release(ctx))
		}
		for _, n := range clients {
			for _, key := range keys {
				require.NoError(t, n.Del(ctx, FenceKey(key)).Err())
			}
		}
		l := take(ctx, t, m)
		defer func() { require.NoError(t, l.Release(ctx)) }()
		for i, tok := range l.Tokens() {
			if floor {
				assert.Greater(t, tok, last[i], "the clock floor keeps %s's tokens increasing", keys[i])
			} else {
				assert.LessOrEqual(t, tok, last[i], "the control: counter-only tokens start over")
			}
		}
	})
}

// NewMultiMutex refuses bad key lists with a *ConfigError.
func multiBadInput(t *testing.T, k Kind) {
	_, _, c, keys := multiFresh(t, k, 2)
	many := make([]string, maxMultiKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("%s:%d", keys[0], i)
	}
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{"Nil", nil, "empty list"},
		{"Empty", []string{}, "empty list"},
		{"EmptyKey", []string{keys[0], ""}, "key 1 is empty"},
		{"Duplicate", []string{keys[0], keys[1], keys[0]}, "keys 0 and 2 are both"},
		{"TooMany", many, fmt.Sprintf("more than the %d", maxMultiKeys)},
		{"Marker", []string{keys[0], MarkerKey}, "marker"},
		{"FenceHash", []string{keys[0], FenceKey(keys[1])}, "fence hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := c.NewMultiMutex(tc.keys)
			assert.Nil(t, m)
			var ce *redlock.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, redlock.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	m := multi(t, c, keys, redlock.WithKeyPrefix("p:"))
	assert.Equal(t, []string{"p:" + keys[0], "p:" + keys[1]}, m.Keys(), "the prefix applies to every key")
	assert.Equal(t, []string{keys[0]}, multi(t, c, keys[:1]).Keys(), "one key is a plain Mutex")
}

// Redlock: a minority of nodes hold one key for another owner. The multi-key
// lock is granted by the majority and writes nothing on the minority (all
// keys or none, per node); when a majority hold it, it gets nothing and
// leaves nothing on any node.
func multiMinority(t *testing.T, k Kind) {
	ctx, clients, c, keys := multiFresh(t, k, 2)
	a, b := keys[0], keys[1]
	minority := len(clients) - majority(len(clients))
	for _, n := range clients[:minority] {
		require.NoError(t, n.Set(ctx, b, "other", time.Minute).Err())
	}
	m := multi(t, c, keys)
	l := take(ctx, t, m)
	want := func(minorityVal, rest string) []string {
		out := everywhere(clients, rest)
		for i := range minority {
			out[i] = minorityVal
		}
		return out
	}
	assert.Equal(t, want("", l.Value()), holders(t, clients, a), "nothing written where a key was taken")
	assert.Equal(t, want("other", l.Value()), holders(t, clients, b))
	require.NoError(t, l.Release(ctx))
	// Release returns at a majority; the last deletes land after it.
	landed(t, func() bool { return slices.Equal(holdersQuiet(clients, b), want("other", "")) }, "the other owner's copies stay")

	for _, n := range clients[:majority(len(clients))] {
		require.NoError(t, n.Set(ctx, b, "other", time.Minute).Err())
	}
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.True(t, strings.Contains(err.Error(), "agreed"), err.Error())
	assert.Equal(t, everywhere(clients, ""), holders(t, clients, a), "a failed acquire leaves nothing")
}

// The restart quarantine applies to a multi-key acquire as to a plain one:
// nodes that are new and not vouched for refuse it (ErrQuarantined), and
// nothing is written; once vouched for, they grant it.
func multiQuarantine(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	c := k.unvouched(t, clients, opts(k.quarantineOn(), []redlock.Option{redlock.WithTTL(longTTL)})...)
	base := redistest.Key(t)
	m := multi(t, c, []string{base + ":a", base + ":b"})
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, redlock.ErrQuarantined)
	for _, key := range m.Keys() {
		assert.Equal(t, everywhere(clients, ""), holders(t, clients, key), key)
	}
	require.NoError(t, c.Vouch(ctx))
	l := take(ctx, t, m)
	require.NoError(t, l.Release(ctx))
}
