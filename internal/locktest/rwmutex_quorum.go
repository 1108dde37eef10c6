package locktest

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// membersOf returns the node indexes in the bit set s.
func membersOf(s uint) []int {
	var out []int
	for i := 0; s != 0; i, s = i+1, s>>1 {
		if s&1 == 1 {
			out = append(out, i)
		}
	}
	return out
}

// only returns, per node, v on the nodes in s and "" elsewhere.
func only(n int, s uint, v string) []string {
	out := make([]string, n)
	for _, i := range membersOf(s) {
		out[i] = v
	}
	return out
}

// Every subset of the five nodes: a Client that reaches only the nodes of
// s (the others' addresses refuse connections). A reader or a writer whose
// Client reaches fewer than three nodes is refused and leaves nothing. For
// every majority A, a reader admitted on exactly A makes every writer
// refused, whatever majority B it reaches (A and B share a node, whose
// script refuses the writer), and the reader's records are untouched; and a
// writer holding exactly A makes every reader refused, whatever majority it
// reaches. 16 majorities, each against 16.
func rwQuorumSubsets(t *testing.T, k Kind) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	base := redistest.Key(t)
	all := uint(1)<<k.Nodes - 1
	via := make(map[uint]*redlock.Client)
	for s := uint(1); s <= all; s++ {
		via[s] = k.unvouched(t, reaching(t, clients, membersOf(s)...), opts(k.quarantineOff(), rwLong())...)
	}
	var majorities []uint
	for s := uint(1); s <= all; s++ {
		if bits.OnesCount(s) > k.Nodes/2 {
			majorities = append(majorities, s)
			continue
		}
		key := fmt.Sprintf("%s:minority:%02x", base, s)
		assert.Nil(t, tryR(ctx, t, rwm(t, via[s], key)), "a reader reaching %v", membersOf(s))
		assert.Nil(t, tryW(ctx, t, rwm(t, via[s], key)), "a writer reaching %v", membersOf(s))
		assert.Equal(t, everywhere(clients, ""), holders(t, clients, key), "nothing left by %v", membersOf(s))
		assert.Equal(t, make([]int64, k.Nodes), readersOn(t, clients, key), "no reader left by %v", membersOf(s))
	}
	require.Len(t, majorities, 16)
	for _, a := range majorities {
		key := fmt.Sprintf("%s:read:%02x", base, a)
		r := tryR(ctx, t, rwm(t, via[a], key))
		require.NotNil(t, r, "a reader reaching %v", membersOf(a))
		landed(t, func() bool { return recordedQuiet(clients, key, r.Value()) == bits.OnesCount(a) }, "the reader on every node it reaches")
		for _, b := range majorities {
			assert.Nil(t, tryW(ctx, t, rwm(t, via[b], key)), "a writer reaching %v while a reader holds %v", membersOf(b), membersOf(a))
		}
		assert.Equal(t, only(k.Nodes, a, readersFlag), holders(t, clients, key), "reader on %v", membersOf(a))
		assert.Equal(t, bits.OnesCount(a), recordedOn(t, clients, key, r.Value()), "reader on %v", membersOf(a))
		require.NoError(t, r.Release(ctx))

		key = fmt.Sprintf("%s:write:%02x", base, a)
		w := tryW(ctx, t, rwm(t, via[a], key))
		require.NotNil(t, w, "a writer reaching %v", membersOf(a))
		landed(t, func() bool { return count(holdersQuiet(clients, key), w.Value()) == bits.OnesCount(a) }, "the writer on every node it reaches")
		for _, b := range majorities {
			assert.Nil(t, tryR(ctx, t, rwm(t, via[b], key)), "a reader reaching %v while a writer holds %v", membersOf(b), membersOf(a))
		}
		assert.Equal(t, only(k.Nodes, a, w.Value()), holders(t, clients, key), "writer on %v", membersOf(a))
		assert.Equal(t, make([]int64, k.Nodes), readersOn(t, clients, key), "writer on %v", membersOf(a))
		require.NoError(t, w.Release(ctx))
	}
}

// A reader recorded on a minority only (here: its record lost on three of
// the five nodes) holds no writer out: the writer is refused on the two
// nodes, granted on the other three, and holds; the reader's next Extend
// finds it lost. Conversely a reader that still has its majority keeps
// the writer out.
func rwMinorityReaders(t *testing.T, k Kind) {
	ctx, clients, c, key := rwFresh(t, k)
	rw := rwm(t, c, key)
	kept := tryR(ctx, t, rw)
	lost := tryR(ctx, t, rw)
	for _, l := range []*redlock.Lease{kept, lost} {
		require.NotNil(t, l)
		landed(t, func() bool { return recordedQuiet(clients, key, l.Value()) == k.Nodes }, "the reader on every node")
	}
	forget := func(l *redlock.Lease, nodes ...int) {
		for _, i := range nodes {
			require.NoError(t, clients[i].ZRem(ctx, ReadersKey(key), l.Value()).Err())
		}
	}
	forget(kept, 3, 4) // kept stays on nodes 0, 1, 2
	assert.Nil(t, tryW(ctx, t, rw), "a reader on a majority keeps the writer out")
	require.NoError(t, kept.Release(ctx))
	forget(lost, 2, 3, 4) // lost stays on nodes 0, 1
	w := tryW(ctx, t, rw)
	require.NotNil(t, w, "a reader on a minority does not keep the writer out")
	assert.Equal(t, []string{readersFlag, readersFlag, w.Value(), w.Value(), w.Value()}, holders(t, clients, key))
	require.ErrorIs(t, lost.Extend(ctx), redlock.ErrLost)
	require.NoError(t, w.Release(ctx))
}
