package redlock_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// TestReplicaAcksMultiKey: with WithReplicaAcks, a multi-key lease is on the
// replica when TryLock returns (with fencing or without); with the replica
// stopped, a multi-key acquire fails saying 0 of 1 replicas acknowledged and
// leaves no key behind, and an extend fails the same way without losing the
// lease.
func TestSingleReplicaAcksMultiKey(t *testing.T) {
	t.Parallel()
	c, primary, replica, pc := ackedClient(t)
	ctx := t.Context()
	base := redistest.Key(t)
	multi := func(name string, fenced bool) *redlock.Mutex {
		var opts []redlock.Option
		if fenced {
			opts = append(opts, redlock.WithFencing())
		}
		m, err := c.NewMultiMutex([]string{base + name + ":a", base + name + ":b"}, opts...)
		require.NoError(t, err)
		return m
	}
	for _, fenced := range []bool{false, true} {
		held := multi("held", fenced)
		l, err := held.TryLock(ctx)
		require.NoError(t, err, "fenced %v", fenced)
		for _, k := range held.Keys() {
			assert.Equal(t, l.Value(), replicaValue(t, replica, k), "fenced %v: the replica has %s when TryLock returns", fenced, k)
		}
		require.NoError(t, l.Release(ctx))
	}
	lease, err := multi("kept", false).TryLock(ctx)
	require.NoError(t, err)

	require.NoError(t, replica.Pause())
	for _, fenced := range []bool{false, true} {
		m := multi("refused", fenced)
		_, err := m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "fenced %v", fenced)
		requireAckError(t, err, 1, 0)
		assert.Zero(t, pc.Exists(ctx, m.Keys()...).Val(), "fenced %v: the failed acquire deleted its keys", fenced)
	}
	requireExtendWaitsForReplica(t, lease, primary, replica)
}
