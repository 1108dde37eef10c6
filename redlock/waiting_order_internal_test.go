package redlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// lateConn holds back the join commands sent through it until the test
// opens gate. A join whose context ended first fails with the context's
// error but still reaches the node later, after the next other command, as
// a client with several connections per node (rueidis) can deliver it.
type lateConn struct {
	redisconn.Conn
	held chan struct{} // one per join held back
	gate chan struct{}

	mu   sync.Mutex
	late []*redis.Cmd
}

func (c *lateConn) Info() redisconn.Info {
	info := c.Conn.Info()
	info.Identity = c // lanes of its own, not the wrapped client's
	return info
}

func (c *lateConn) Lane() redisconn.Lane {
	if l := c.Conn.Lane(); l != nil {
		return &lateLane{l, c}
	}
	return nil
}

func (c *lateConn) Process(ctx context.Context, cmd *redis.Cmd) error {
	c.do(ctx, []*redis.Cmd{cmd}, c.Conn.Pipeline)
	return cmd.Err()
}

func (c *lateConn) Pipeline(ctx context.Context, cmds []*redis.Cmd) { c.do(ctx, cmds, c.Conn.Pipeline) }

type lateLane struct {
	redisconn.Lane
	c *lateConn
}

func (l *lateLane) Process(ctx context.Context, cmd *redis.Cmd) error {
	l.c.do(ctx, []*redis.Cmd{cmd}, l.Lane.Pipeline)
	return cmd.Err()
}

func (l *lateLane) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	l.c.do(ctx, cmds, l.Lane.Pipeline)
}

func (c *lateConn) do(ctx context.Context, cmds []*redis.Cmd, send func(context.Context, []*redis.Cmd)) {
	isJoin := false
	for _, cmd := range cmds {
		if a := cmd.Args(); len(a) > 1 && a[1] == joinScript.Hash() {
			isJoin = true
		}
	}
	if !isJoin {
		send(ctx, cmds)
		c.mu.Lock()
		late := c.late
		c.late = nil
		c.mu.Unlock()
		for _, cmd := range late {
			send(context.Background(), []*redis.Cmd{redis.NewCmd(context.Background(), cmd.Args()...)})
		}
		return
	}
	select { // a join round after the ones the test counts must not block
	case c.held <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
	case <-c.gate:
	}
	if err := ctx.Err(); err != nil {
		c.mu.Lock()
		c.late = append(c.late, cmds...)
		c.mu.Unlock()
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return
	}
	send(ctx, cmds)
}

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
		conns[i] = &lateConn{Conn: redisconn.GoRedis(cl), held: held, gate: gate}
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
