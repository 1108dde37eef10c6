package redlock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redisconn"
)

// hookConn passes every batch of commands sent through it, on the Conn or
// on one of its lanes, to do, with the function that sends them on.
type hookConn struct {
	redisconn.Conn
	do func(ctx context.Context, cmds []*redis.Cmd, send func(context.Context, []*redis.Cmd))
}

func (c *hookConn) Info() redisconn.Info {
	info := c.Conn.Info()
	info.Identity = c // lanes of its own, not the wrapped client's
	return info
}

func (c *hookConn) Lane() redisconn.Lane {
	if l := c.Conn.Lane(); l != nil {
		return &hookLane{l, c}
	}
	return nil
}

func (c *hookConn) Process(ctx context.Context, cmd *redis.Cmd) error {
	c.do(ctx, []*redis.Cmd{cmd}, c.Conn.Pipeline)
	return cmd.Err()
}

func (c *hookConn) Pipeline(ctx context.Context, cmds []*redis.Cmd) { c.do(ctx, cmds, c.Conn.Pipeline) }

type hookLane struct {
	redisconn.Lane
	c *hookConn
}

func (l *hookLane) Process(ctx context.Context, cmd *redis.Cmd) error {
	l.c.do(ctx, []*redis.Cmd{cmd}, l.Lane.Pipeline)
	return cmd.Err()
}

func (l *hookLane) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	l.c.do(ctx, cmds, l.Lane.Pipeline)
}

// gatedConn holds back the commands of one script until the test opens
// gate, and says so on held (without blocking: rounds past the ones a test
// counts pass the signal by). With late set, a held command whose context
// ends first fails with the context's error but still reaches the node
// afterwards, after the next other command, as a client with several
// connections per node (rueidis) can deliver it.
type gatedConn struct {
	script *redis.Script
	late   bool
	held   chan struct{}
	gate   chan struct{}

	mu      sync.Mutex
	pending []*redis.Cmd // late commands still to reach the node
}

// wrap returns conn with c's gate in front of it.
func (c *gatedConn) wrap(conn redisconn.Conn) redisconn.Conn { return &hookConn{Conn: conn, do: c.do} }

func (c *gatedConn) do(ctx context.Context, cmds []*redis.Cmd, send func(context.Context, []*redis.Cmd)) {
	gated := false
	for _, cmd := range cmds {
		if a := cmd.Args(); len(a) > 1 && a[1] == c.script.Hash() {
			gated = true
		}
	}
	if !gated {
		send(ctx, cmds)
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, cmd := range pending {
			send(context.Background(), []*redis.Cmd{redis.NewCmd(context.Background(), cmd.Args()...)})
		}
		return
	}
	select {
	case c.held <- struct{}{}:
	default:
	}
	var cancelled <-chan struct{}
	if c.late {
		cancelled = ctx.Done()
	}
	select {
	case <-cancelled:
	case <-c.gate:
	}
	if err := ctx.Err(); c.late && err != nil {
		c.mu.Lock()
		c.pending = append(c.pending, cmds...)
		c.mu.Unlock()
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return
	}
	send(ctx, cmds)
}
