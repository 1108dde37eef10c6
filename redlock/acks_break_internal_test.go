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

// breaker fails the next pipeline of two commands or more on a lane
// part-way through, as a read timeout does: the first command keeps its
// reply, every later one (the WAIT among them) gets the timeout.
type breaker struct{ next atomic.Bool }

func (k *breaker) do(ctx context.Context, cmds []*redis.Cmd, send func(context.Context, []*redis.Cmd)) {
	send(ctx, cmds)
	if len(cmds) > 2 && k.next.CompareAndSwap(true, false) {
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
	var brk breaker
	e, err := newClient("redlock", []redisconn.Conn{&hookConn{Conn: redisconn.GoRedis(pc), do: brk.do}}, []Option{WithTTL(time.Minute), WithNodeTimeout(time.Second),
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
	brk.next.Store(true)
	e.nodes[0].batch.submit(false, reqs...) // one batch: SET a, SET b, WAIT
	for _, r := range rounds {
		r.Wait()
	}
	require.False(t, brk.next.Load(), "the batch went out as one pipeline")
	assert.Equal(t, "v", pc.Get(ctx, key+":a").Val(), "the first write landed")
	assert.Zero(t, rounds[0].OK(), "the first write answered, its WAIT did not: no vote")
	require.Len(t, rounds[0].Replies(), 1)
	assert.ErrorIs(t, rounds[0].Replies()[0].Err, ErrReplicaAcks)
	assert.Zero(t, rounds[1].OK(), "the second write failed")
}
