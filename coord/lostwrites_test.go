package coord_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/redlock"
)

// Epochs and claim tokens are fencing tokens, so they inherit the clock
// floor: they keep increasing across a restart of every node without
// persistence, which forgets every counter (docs/fencing.md).

func restartAll(t *testing.T, b backend) {
	t.Helper()
	for _, n := range b.nodes {
		require.NoError(t, n.Restart(t.Context()))
	}
	// Connections to the old processes are dead: let every client find that
	// out before the lock uses it.
	for _, c := range b.clients {
		require.Eventually(t, func() bool { return c.Ping(t.Context()).Err() == nil }, 10*time.Second, 10*time.Millisecond)
	}
}

func fencedBackends(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("single", func(t *testing.T) { f(t, newSingle(t, redlock.WithFencing())) })
	t.Run("redlock", func(t *testing.T) { f(t, newRedlock(t, 3, redlock.WithFencing())) })
}

func TestEpochsIncreaseAcrossLostWrites(t *testing.T) {
	fencedBackends(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		e := newElection(t, b)
		first, err := e.Campaign(ctx, "a")
		require.NoError(t, err)
		require.NoError(t, first.Resign(ctx))
		restartAll(t, b)
		second, err := e.Campaign(ctx, "b")
		require.NoError(t, err)
		assert.Greater(t, second.Epoch(), first.Epoch(), "the next leader's epoch after every node forgot the counter")
		require.NoError(t, second.Resign(ctx))
	})
}

func TestClaimTokensIncreaseAcrossLostWrites(t *testing.T) {
	fencedBackends(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		cs := newClaims(t, b, coord.WithFencing())
		a, st, err := cs.Claim(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, coord.ClaimOwned, st)
		require.Positive(t, a.Token())
		require.NoError(t, a.Abandon(ctx))
		restartAll(t, b)
		b2, st, err := cs.Claim(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, coord.ClaimOwned, st)
		assert.Greater(t, b2.Token(), a.Token(), "the next claim's token after every node forgot the counter")
		require.NoError(t, b2.Done(ctx))
	})
}
