package redlock_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestReplicaAcksSemaphore: with WithReplicaAcks, a semaphore's holder is on
// the replica when TryAcquire returns; with the replica stopped, an acquire
// fails saying 0 of 1 replicas acknowledged and leaves no holder behind, and
// an extend fails the same way without losing the lease.
func TestSingleReplicaAcksSemaphore(t *testing.T) {
	t.Parallel()
	c, primary, replica, pc := ackedClient(t)
	ctx := t.Context()
	s, err := locktest.NewSem(c, redistest.Key(t), 3)
	require.NoError(t, err)
	rc := redistest.Client(t, replica.Addr())

	l, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	assert.NoError(t, rc.ZScore(ctx, s.Key(), l.Value()).Err(), "the replica has the holder when TryAcquire returns")

	require.NoError(t, replica.Pause())
	_, err = s.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	requireAckError(t, err, 1, 0)
	assert.EqualValues(t, 1, pc.ZCard(ctx, s.Key()).Val(), "the failed acquire removed its holder")
	requireExtendWaitsForReplica(t, l, primary, replica)
}
