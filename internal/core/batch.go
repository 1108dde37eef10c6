package core

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
)

// decoder turns one node's reply into a vote.
type decoder func(cmd *redis.Cmd) (int64, error)

// request is one node's share of a round: a command, and where its outcome
// goes.
type request struct {
	r      *quorum.Round[int64]
	index  int
	cmd    *redis.Cmd
	decode decoder
	// after is the command this one must follow on the node (sendPaired),
	// or nil; reloaded records that this one was re-sent as EVAL after
	// NOSCRIPT, and so ran after the commands behind it in its batch.
	after    *request
	reloaded bool
}

func (q *request) deliver() { q.deliverAcked(nil) }

// deliverAcked delivers q's outcome, with ackErr in place of a successful
// write's vote when too few replicas acknowledged it (acks.go).
func (q *request) deliverAcked(ackErr error) {
	v, err := q.decode(q.cmd)
	if err == nil && ackErr != nil {
		err = ackErr
	}
	q.r.Deliver(q.index, v, err)
}

// batcher sends the lock commands of one node. At most maxSenders batches
// are in flight to the node; commands that arrive while all of them are wait
// for one to return and then go out together, as one pipeline: one write and
// one read for all of them instead of one each. Under light load a command
// goes out alone, at once: batching adds no delay, only coalesces what would
// otherwise queue for connections. Each batch is sent from a goroutine
// started when the queue needs one, which exits when the queue is empty (so
// nothing runs while no lock is being taken, and Engine.Wait joins them all).
//
// Batching changes nothing in what a round decides: each command is the one
// the round would have sent, on the node it would have gone to, under the
// round's deadline; a command whose round has already given up is not sent.
type batcher struct {
	conn      Conn
	honorsCtx bool
	wg        *sync.WaitGroup
	acks      *acks // nil: no WAIT after lease writes

	mu      sync.Mutex
	queue   []*request
	senders int // goroutines sending batches (at most maxSenders)
	spare   []*request
}

// maxSenders bounds the batches in flight to one node. One would batch the
// most, but a command that arrives just after a batch left would wait a whole
// round trip for it before going out itself: on a slow link that doubles its
// latency. With a few in flight, a command goes out at once unless that many
// batches are already on their way.
var maxSenders = 2

// submit queues q and makes sure it gets sent. With inline set (one node,
// a client that honours context deadlines, so the call ends at the round's
// deadline), a caller that finds a sender free sends the batch itself, from
// its own goroutine, and returns with q delivered; otherwise a goroutine
// sends it.
func (b *batcher) submit(inline bool, qs ...*request) {
	b.mu.Lock()
	b.queue = append(b.queue, qs...) // together: one batch, in this order
	if b.senders >= maxSenders {
		b.mu.Unlock()
		return // a sender will take it
	}
	b.senders++
	b.mu.Unlock()
	if inline && !b.sendNext() {
		return
	}
	b.wg.Add(1)
	go b.loop() // (more arrived while we sent: hand over)
}

func (b *batcher) loop() {
	defer b.wg.Done()
	for b.sendNext() {
	}
}

// sendNext sends everything queued as one batch and reports whether more has
// queued since; if not, the calling sender stops.
func (b *batcher) sendNext() bool {
	b.mu.Lock()
	if len(b.queue) == 0 { // another sender took it
		b.senders--
		b.mu.Unlock()
		return false
	}
	batch := b.queue
	b.queue, b.spare = b.spare[:0], nil
	b.mu.Unlock()

	b.send(batch)
	clear(batch)

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare == nil {
		b.spare = batch[:0]
	}
	if len(b.queue) == 0 {
		b.senders--
		return false
	}
	return true
}

// send runs batch: commands whose round has given up are not sent; one
// command goes out on its own, several as a pipeline under the latest of
// their deadlines.
func (b *batcher) send(batch []*request) {
	live := batch[:0]
	for _, q := range batch {
		if err := q.r.Context().Err(); err != nil {
			q.cmd.SetErr(err)
			q.deliver()
			continue
		}
		live = append(live, q)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		q := live[0]
		ctx := q.r.Context()
		if b.acked(q) {
			b.sendAcked(ctx, live)
			return
		}
		_ = b.conn.Process(ctx, q.cmd)
		retryScript(ctx, b.conn, q.cmd)
		q.deliver()
		return
	}
	latest := live[0]
	for _, q := range live[1:] {
		if q.r.Deadline().After(latest.r.Deadline()) {
			latest = q
		}
	}
	// The batch outlives a cancelled round (others still want their
	// replies), but never its own latest deadline.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(latest.r.Context()), latest.r.Deadline())
	defer cancel()
	if slices.ContainsFunc(live, b.acked) {
		b.sendAcked(ctx, live)
		return
	}
	b.conn.Pipeline(ctx, cmdsOf(live))
	for _, q := range live {
		q.reloaded = retryScript(ctx, b.conn, q.cmd)
		if q.after != nil && q.after.reloaded {
			// It ran before the command it must follow (re-sent as EVAL
			// only now). If that cost it its vote, ask again.
			if _, err := q.decode(q.cmd); err != nil {
				c := redis.NewCmd(ctx, q.cmd.Args()...)
				_ = b.conn.Process(ctx, c)
				retryScript(ctx, b.conn, c)
				q.cmd = c
			}
		}
		q.deliver()
	}
}

// retryScript re-sends an EVALSHA the node did not know (a restart, SCRIPT
// FLUSH) as EVAL, which also caches the script again, leaves the outcome in
// cmd, and reports whether it did.
func retryScript(ctx context.Context, c Conn, cmd *redis.Cmd) bool {
	if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return false
	}
	e := evalOf(ctx, cmd)
	if e == cmd {
		return false // not one of redfence's scripts
	}
	_ = c.Process(ctx, e)
	v, err := e.Result()
	cmd.SetVal(v)
	cmd.SetErr(err)
	return true
}

// cmdsOf returns the commands of qs, in order.
func cmdsOf(qs []*request) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(qs))
	for i, q := range qs {
		cmds[i] = q.cmd
	}
	return cmds
}

// sendAll starts a round that sends the command args to every node, through
// the nodes' batchers, and decodes each reply with decode. With one node whose
// client honours context deadlines, an idle node's command is sent from the
// calling goroutine.
func (e *Engine) sendAll(ctx context.Context, need int, timeout time.Duration, args []any, decode decoder) *quorum.Round[int64] {
	r, reqs := e.prepare(ctx, need, timeout, args, decode)
	for i := range reqs {
		b := e.nodes[i].batch
		b.submit(len(reqs) == 1 && b.honorsCtx, &reqs[i]) // a batch runs under its requests' own round contexts, not the submitter's
	}
	return r
}

// prepare starts a round for args without sending anything: the caller
// submits reqs[i] to node i.
func (e *Engine) prepare(ctx context.Context, need int, timeout time.Duration, args []any, decode decoder) (*quorum.Round[int64], []request) {
	n := len(e.nodes)
	r := quorum.Begin[int64](ctx, n, need, timeout)
	reqs := make([]request, n)
	for i := range reqs {
		q := &reqs[i]
		q.r, q.index, q.decode = r, i, decode
		q.cmd = redis.NewCmd(r.Context(), args...) // the round's context derives from ctx
	}
	return r, reqs
}

// sendPaired sends, on every node, first's command and then second's, in
// the same batch: one pipeline on one connection, so the node runs them in
// this order, in one round trip.
func (e *Engine) sendPaired(first, second []request) {
	for i := range first {
		second[i].after = &first[i]
		e.nodes[i].batch.submit(false, &first[i], &second[i])
	}
}
