package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// heldConn holds back the release scripts sent through it until the test
// opens gate, and says so on held.
type heldConn struct {
	redisconn.Conn
	held chan struct{}
	gate chan struct{}
}

func (c *heldConn) Info() redisconn.Info {
	info := c.Conn.Info()
	info.Identity = c // lanes of its own, not the wrapped client's
	return info
}

func (c *heldConn) Lane() redisconn.Lane {
	if l := c.Conn.Lane(); l != nil {
		return &heldLane{l, c}
	}
	return nil
}

func (c *heldConn) Process(ctx context.Context, cmd *redis.Cmd) error {
	c.hold(cmd)
	return c.Conn.Process(ctx, cmd)
}

func (c *heldConn) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	c.hold(cmds...)
	c.Conn.Pipeline(ctx, cmds)
}

type heldLane struct {
	redisconn.Lane
	c *heldConn
}

func (l *heldLane) Process(ctx context.Context, cmd *redis.Cmd) error {
	l.c.hold(cmd)
	return l.Lane.Process(ctx, cmd)
}

func (l *heldLane) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	l.c.hold(cmds...)
	l.Lane.Pipeline(ctx, cmds)
}

func (c *heldConn) hold(cmds ...*redis.Cmd) {
	for _, cmd := range cmds {
		if a := cmd.Args(); len(a) > 1 && a[1] == releaseScript.Hash() {
			select {
			case c.held <- struct{}{}:
			default:
			}
			<-c.gate
			return
		}
	}
}

// Release returns once a majority of the nodes deleted the value, while
// another node's delete is still on its way. A Lock of the same key then
// holds on the nodes that deleted it, and its command to the other node
// waits behind the delete (a node gets one key's commands in order): once
// the delete arrives, that node grants the new lease too.
func TestReleaseReturnsAtMajority(t *testing.T) {
	const n = 3
	clients := redistest.Clients(t, redistest.Nodes(t, n))
	ctx := context.Background()
	conns := make([]redisconn.Conn, n)
	for i, cl := range clients {
		require.NoError(t, releaseScript.Load(ctx, cl).Err()) // sent as EVALSHA from the first
		conns[i] = redisconn.GoRedis(cl)
	}
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	conns[2] = &heldConn{Conn: conns[2], held: held, gate: gate}
	e, err := newClient("redlock", conns, []Option{WithQuarantine(0), WithTTL(time.Hour), WithNodeTimeout(time.Minute)})
	require.NoError(t, err)
	key := redistest.Key(t)
	m, err := e.NewMutex(key)
	require.NoError(t, err)
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	l.acquire.Settle()
	for i, cl := range clients {
		require.Equal(t, l.Value(), cl.Get(ctx, key).Val(), "node %d holds the lease", i)
	}

	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	<-held // node 2's delete is on its way, and stays there
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second): // the node timeout is a minute
		close(gate)
		t.Fatal("Release waited for the node whose delete was held back")
	}
	for i, cl := range clients[:2] {
		assert.Zero(t, cl.Exists(ctx, key).Val(), "node %d deleted the value before Release returned", i)
	}
	assert.Equal(t, l.Value(), clients[2].Get(ctx, key).Val(), "node 2's delete has not arrived")

	l2, err := m.Lock(ctx) // nodes 0 and 1 grant it
	require.NoError(t, err)
	b := e.nodes[2].batch
	looks := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.looks }
	before := looks()
	for range 100 { // time passes while node 2's acquire waits
		require.NoError(t, clients[0].Ping(ctx).Err())
	}
	assert.Less(t, looks()-before, 10, "node 2's senders wait for the delete on its way, and do not spin")
	close(gate)
	l2.acquire.Settle()
	assert.Equal(t, l2.Value(), clients[2].Get(ctx, key).Val(), "node 2 got the acquire after the delete, and granted it")
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, e.Close()) // waits for the deletes on their way
	for i, cl := range clients {
		assert.Zero(t, cl.Exists(ctx, key).Val(), "node %d deleted the value once its delete arrived", i)
	}
}
