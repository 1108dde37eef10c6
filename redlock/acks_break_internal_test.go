package redlock

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redisconn"
)

// breakConn's lanes fail the next pipeline of two commands or more part-way
// through, as a read timeout does: the first command keeps its reply, every
// later one (the WAIT among them) gets the timeout.
type breakConn struct {
	redisconn.Conn
	breakNext atomic.Bool
}

func (c *breakConn) Info() redisconn.Info {
	info := c.Conn.Info()
	info.Identity = c // lanes of its own, not the wrapped client's
	return info
}

func (c *breakConn) Lane() redisconn.Lane {
	if l := c.Conn.Lane(); l != nil {
		return &breakLane{l, c}
	}
	return nil
}

type breakLane struct {
	redisconn.Lane
	c *breakConn
}

func (l *breakLane) Pipeline(ctx context.Context, cmds []*redis.Cmd) {
	l.Lane.Pipeline(ctx, cmds)
	if len(cmds) > 2 && l.c.breakNext.CompareAndSwap(true, false) {
		for _, cmd := range cmds[1:] {
			cmd.SetErr(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)) // not a stale connection: no second try
		}
	}
}

// With replica acks, a write counts only once its WAIT answered: a lane
// whose connection fails after the write's reply but before the WAIT's
// gives it no vote, though the key was written.
func TestAckedWriteNeedsItsWait(t *testing.T) {
	primary, _ := redistest.Replicated(t, 1)
	pc := redistest.Client(t, primary.Addr())
	ctx := context.Background()
	conn := &breakConn{Conn: redisconn.GoRedis(pc)}
	e, err := newClient("redlock", []redisconn.Conn{conn}, []Option{WithTTL(time.Minute), WithNodeTimeout(time.Second),
		WithReplicaAcks(1, 500*time.Millisecond)})
	require.NoError(t, err)
	defer func() { _ = e.Close() }()
	key := redistest.Key(t)
	var (
		rounds []*quorum.Round[int64]
		reqs   []*request
	)
	for _, k := range []string{key + ":a", key + ":b"} {
		m, err := e.NewMutex(k)
		require.NoError(t, err)
		r, qs := e.prepare(ctx, 1, 5*time.Second, withValue(m.acquireTmpl, "v"), m.acquireDecoder())
		rounds, reqs = append(rounds, r), append(reqs, &qs[0])
	}
	conn.breakNext.Store(true)
	e.nodes[0].batch.submit(false, reqs...) // one batch: SET a, SET b, WAIT
	for _, r := range rounds {
		r.Wait()
	}
	require.False(t, conn.breakNext.Load(), "the batch went out as one pipeline on a lane")
	assert.Equal(t, "v", pc.Get(ctx, key+":a").Val(), "the first write landed")
	assert.Zero(t, rounds[0].OK(), "the first write answered, its WAIT did not: no vote")
	require.Len(t, rounds[0].Replies(), 1)
	assert.ErrorIs(t, rounds[0].Replies()[0].Err, ErrReplicaAcks)
	assert.Zero(t, rounds[1].OK(), "the second write failed")
}
