package ratelimit

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// maxBatches bounds the pipelines a Limiter has in flight. With few, calls
// wait for a round trip in the queue and a network link stays idle; with
// many, batches are small and a loaded server reads more. make bench, 64
// workers, GCRA against redis_rate, loopback then a link with 1ms added each
// way, on an AMD machine: 2 gave 2.51x and 0.85x, 4 gave 2.33x and 1.07x, 8
// gave 2.21x and 1.19x; on an Intel one, two runs each: 4 gave 1.82-1.91x
// and 0.88-0.92x, 6 1.88-1.90x and 1.00-1.03x, 8 1.80-1.88x and 1.06-1.07x.
const maxBatches = 8

// pipe sends the scripts of concurrent calls together. A call that finds
// fewer than maxBatches batches in flight runs its script at once, as a
// lone call does; the others queue, and when a batch is back its sender
// hands the whole queue to the first queued call, which sends it as one
// pipeline (one write and one read on each side) and hands on in turn.
// Each script still runs atomically on its own: batching changes how calls
// travel, never what they decide. No goroutine is started.
type pipe struct {
	mu    sync.Mutex
	queue []*call
	busy  int // batches being sent, or handed over to a queued call
}

// call is one queued script run: its arguments, then its reply.
type call struct {
	ctx  context.Context
	keys []string
	args []any
	cmd  *redis.Cmd
	// done receives nil once cmd holds the reply, or the batch this call
	// is to send (it is the batch's first call). Buffered: never blocks.
	done chan []*call
}

// pipeliner is a client that can send a pipeline: every go-redis client.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// do runs a script with keys and args on l's client and returns its
// command, holding the reply. It returns ctx's error instead, leaving the
// command to its batch, if ctx ends while the call is queued or while the
// batch it rides in is on its way.
func (l *Limiter) do(ctx context.Context, keys []string, args []any) (*redis.Cmd, error) {
	if l.pl == nil { // a client that cannot pipeline: every call alone
		return l.script.Run(ctx, l.client, keys, args...), nil
	}
	p := &l.pipe
	p.mu.Lock()
	if p.busy < maxBatches {
		p.busy++
		p.mu.Unlock()
		cmd := l.script.Run(ctx, l.client, keys, args...)
		l.handOn()
		return cmd, nil
	}
	c := &call{ctx: ctx, keys: keys, args: args, done: make(chan []*call, 1)}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case b := <-c.done:
		return l.taken(c, b), nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if i := slices.Index(p.queue, c); i >= 0 { // still queued: leave
		p.queue = slices.Delete(p.queue, i, i+1)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	p.mu.Unlock()
	// Taken into a batch. Its sender was named under mu, so if it is c,
	// the batch is in done already: c must send it, for the others.
	select {
	case b := <-c.done:
		return l.taken(c, b), nil
	default:
		return nil, ctx.Err() // the reply comes later, unread
	}
}

// taken finishes c, taken from the queue: b is the batch c sends (c is its
// first call), or nil once c's reply is in.
func (l *Limiter) taken(c *call, b []*call) *redis.Cmd {
	if b != nil {
		l.send(b)
	}
	return c.cmd
}

// send sends batch (its first call is the caller's own), hands on, and then
// tells the batch's other calls that their replies are in.
func (l *Limiter) send(batch []*call) {
	l.pipeline(batch)
	l.handOn()
	for _, c := range batch[1:] {
		c.done <- nil
	}
}

// handOn hands what queued while a batch was on its way to the first
// queued call, which sends it; with nothing queued, one batch fewer is busy.
func (l *Limiter) handOn() {
	p := &l.pipe
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.busy--
		return
	}
	next := p.queue
	p.queue = nil
	next[0].done <- next // busy stays counted: the batch goes on with next[0]
}

// pipeline sends batch: a lone call as it is, more as one pipeline under
// the latest deadline of their contexts (none if one has none) and
// cancelled by none of them; a script the server did not know goes again,
// alone, through Script.Run (EVAL).
func (l *Limiter) pipeline(batch []*call) {
	if len(batch) == 1 {
		c := batch[0]
		c.cmd = l.script.Run(c.ctx, l.client, c.keys, c.args...)
		return
	}
	ctx := context.WithoutCancel(batch[0].ctx)
	deadline, ok := batch[0].ctx.Deadline()
	for _, c := range batch[1:] {
		d, has := c.ctx.Deadline()
		if ok = ok && has; ok && d.After(deadline) {
			deadline = d
		}
	}
	if ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	pipe := l.pl.Pipeline()
	for _, c := range batch {
		c.cmd = l.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			c.cmd = l.script.Run(ctx, l.client, c.keys, c.args...)
		}
	}
}
