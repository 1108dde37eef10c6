package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// A waiter whose ctx ends while its join is on the way leaves the queues
// only after the join answered: a join that reached a node after the leave
// would stay queued there, with nobody behind it, for three polls (here
// three hours), and a release could grant it the key.
func TestCancelledJoinLandsBeforeLeave(t *testing.T) {
	const n = 3
	clients := redistest.Clients(t, redistest.Nodes(t, n))
	ctx := context.Background()
	gate := make(chan struct{})
	conns := make([]redisconn.Conn, n)
	held := make(chan struct{}, n)
	for i, cl := range clients {
		require.NoError(t, joinScript.Load(ctx, cl).Err()) // the late join runs as EVALSHA
		conns[i] = (&gatedConn{script: joinScript, late: true, held: held, gate: gate}).wrap(redisconn.GoRedis(cl))
	}
	hour := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	e, err := newClient("redlock", conns, []Option{WithQuarantine(0), WithRetry(hour), WithTTL(time.Hour), WithNodeTimeout(time.Minute)})
	require.NoError(t, err)
	key := redistest.Key(t)
	for _, cl := range clients {
		require.NoError(t, cl.Set(ctx, key, "other owner", time.Minute).Err())
	}
	m, err := e.NewMutex(key)
	require.NoError(t, err)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := m.Lock(lctx)
		done <- err
	}()
	for range n {
		<-held // every node's join is on the way
	}
	cancel()
	close(gate)
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, e.Close()) // waits for the calls in flight, the leave among them
	for i, cl := range clients {
		require.Zero(t, cl.ZCard(ctx, m.queueKey).Val(), "node %d keeps an entry of the waiter that left", i)
	}
}
