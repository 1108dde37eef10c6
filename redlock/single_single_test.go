package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

func TestSingleNewValidation(t *testing.T) {
	node := redistest.Nodes(t, 1)[0]
	a := redistest.Client(t, node.Addr())
	var nilClient *redis.Client
	only := []redis.UniversalClient{a}
	locktest.NewRefuses(t, singleKind, "single: ", []locktest.ConfigCase{
		locktest.Refused("nil interface", "client 0 is nil", []redis.UniversalClient{nil}),
		locktest.Refused("typed nil", "client 0 is nil", []redis.UniversalClient{nilClient}),
		locktest.Refused("zero TTL", "TTL: must be positive", only, redlock.WithTTL(0)),
		locktest.Refused("drift", "drift factor", only, redlock.WithDriftFactor(-0.01)),
		locktest.Refused("node timeout", "below half the TTL", only, redlock.WithTTL(100*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond)),
		locktest.Refused("nil retry", "retry", only, redlock.WithRetry(nil)),
	})
	c := newSingleClient(t, a)
	_, err := c.NewMutex("")
	assert.ErrorContains(t, err, "key: empty")
}

// Redis down: TryLock fails with ErrNotAcquired and the node's error, within
// the context's deadline; Lock keeps trying until the deadline.
func TestSingleNodeDown(t *testing.T) {
	node := redistest.Nodes(t, 1)[0]
	client := redistest.Client(t, node.Addr())
	c := newSingleClient(t, client, redlock.WithTTL(time.Second))
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	require.NoError(t, node.Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Len(t, qe.Nodes, 1)
	assert.Equal(t, node.Addr(), qe.Nodes[0].Addr)
	assert.NotErrorIs(t, err, redlock.ErrTaken, "an outage is not contention")
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, node.Restart(context.Background()))
	l, err := m.TryLock(context.Background())
	require.NoError(t, err, "works again once Redis is back")
	require.NoError(t, l.Release(context.Background()))
}

func TestSingleCheckNodes(t *testing.T) {
	ctx := context.Background()
	plain := redistest.Nodes(t, 1)[0]
	aof := redistest.Nodes(t, 1, func(o *redisnode.Options) { o.AppendFsyncAlways = true })[0]

	checks := newSingleClient(t, redistest.Client(t, plain.Addr())).CheckNodes(ctx)
	require.Len(t, checks, 1)
	require.NoError(t, checks[0].Err)
	assert.False(t, (checks[0].Err == nil && len(checks[0].Risks) == 0))
	assert.Equal(t, "no", checks[0].AppendOnly)
	assert.Equal(t, "master", checks[0].Role)
	assert.Contains(t, checks[0].Risks[0], "appendonly is off")

	client := redistest.Client(t, aof.Addr())
	checks = newSingleClient(t, client).CheckNodes(ctx)
	require.NoError(t, checks[0].Err)
	assert.True(t, (checks[0].Err == nil && len(checks[0].Risks) == 0), "risks: %v", checks[0].Risks)

	require.NoError(t, client.ConfigSet(ctx, "maxmemory", "100mb").Err())
	require.NoError(t, client.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	checks = newSingleClient(t, client).CheckNodes(ctx)
	require.Len(t, checks[0].Risks, 1)
	assert.Contains(t, checks[0].Risks[0], "allkeys-lru can evict")

	require.NoError(t, aof.Kill())
	checks = newSingleClient(t, client).CheckNodes(ctx)
	assert.Error(t, checks[0].Err, "an unreachable node is reported, not skipped")
	assert.False(t, (checks[0].Err == nil && len(checks[0].Risks) == 0))
}
