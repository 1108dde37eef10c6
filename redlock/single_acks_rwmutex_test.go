package redlock_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestReplicaAcksRWMutex: with WithReplicaAcks, a reader is recorded and a
// writer's value set on the replica when TryRLock and TryLock return; with
// the replica stopped, a read acquire fails saying 0 of 1 replicas
// acknowledged and leaves no reader behind, and a read extend fails the same
// way without losing the lease.
func TestSingleReplicaAcksRWMutex(t *testing.T) {
	t.Parallel()
	c, primary, replica, pc := ackedClient(t)
	ctx := t.Context()
	rw, err := locktest.NewRW(c, redistest.Key(t))
	require.NoError(t, err)
	rc := redistest.Client(t, replica.Addr())
	readers := redlock.ReadersKeyOf(rw.Key())

	w, err := rw.TryLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, w.Value(), rc.Get(ctx, rw.Key()).Val(), "the replica has the writer when TryLock returns")
	require.NoError(t, w.Release(ctx))

	r, err := rw.TryRLock(ctx)
	require.NoError(t, err)
	assert.NoError(t, rc.ZScore(ctx, readers, r.Value()).Err(), "the replica has the reader when TryRLock returns")

	require.NoError(t, replica.Pause())
	_, err = rw.TryRLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	requireAckError(t, err, 1, 0)
	assert.EqualValues(t, 1, pc.ZCard(ctx, readers).Val(), "the failed acquire removed its reader")
	requireExtendWaitsForReplica(t, r, primary, replica)
}
