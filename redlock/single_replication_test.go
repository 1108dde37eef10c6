package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// oneReplica starts a primary with one replica and returns them and a client
// of the primary.
func oneReplica(t *testing.T) (primary, replica *redisnode.Node, pc *redis.Client) {
	t.Helper()
	primary, replicas := redistest.Replicated(t, 1)
	return primary, replicas[0], redistest.Client(t, primary.Addr())
}

// replicated waits (WAIT, at most 5s) until n replicas of the primary pc
// have every write made so far.
func replicated(ctx context.Context, t *testing.T, pc *redis.Client, n int, msg string) {
	t.Helper()
	acked, err := pc.Do(ctx, "WAIT", n, 5000).Int()
	require.NoError(t, err)
	require.Equal(t, n, acked, msg)
}

// cutOff stops replica and closes its link to the primary pc: writes reach
// only the primary until the replica resumes.
func cutOff(ctx context.Context, t *testing.T, pc *redis.Client, replica *redisnode.Node) {
	t.Helper()
	require.NoError(t, replica.Pause())
	require.NoError(t, pc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
}

// leaseReplicaMisses takes m twice, waits until the replica has both (its
// fence counter is 2), cuts the replica off and takes m once more: it
// returns a lease whose key and counter only the primary pc has.
func leaseReplicaMisses(ctx context.Context, t *testing.T, m *redlock.Mutex, pc *redis.Client, replica *redisnode.Node) *redlock.Lease {
	t.Helper()
	for range 2 {
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	replicated(ctx, t, pc, 1, "the replica has the first two acquisitions")
	cutOff(ctx, t, pc, replica)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	return l
}
