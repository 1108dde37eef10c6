package redlock

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/keys"
	"github.com/redfence/redfence/internal/quorum"
	"github.com/redfence/redfence/redisconn"
)

// decoder turns one node's reply into a vote.
type decoder func(cmd *redis.Cmd) (int64, error)

// request is one node's share of a round.
type request struct {
	r      *quorum.Round[int64]
	index  int
	args   []any // the command
	decode decoder
	order  order      // how it is ordered with the releases of its key (batcher)
	proof  proof      // its proven form, for a proven lane (proof.go)
	cmd    *redis.Cmd // what was sent: args, or the proven form (proven)
	proven bool
	ackErr error // the write's replica acknowledgement error (acks.go)
}

// deliver delivers q's outcome; ackErr, if any, replaces a write's vote.
func (q *request) deliver() {
	v, err := q.decode(q.cmd)
	if err == nil && q.ackErr != nil {
		err = q.ackErr
	}
	q.r.Deliver(q.index, v, err)
}

// sender is what a batch goes out on: a Lane, or the node's Conn.
type sender interface {
	Process(ctx context.Context, cmd *redis.Cmd) error
	Pipeline(ctx context.Context, cmds []*redis.Cmd)
}

// batcher sends one node's lock commands, at most max batches in
// flight and what queues meanwhile as one pipeline; it changes nothing in
// what a round decides (docs/design.md, Batching).
type batcher struct {
	conn       redisconn.Conn
	honorsCtx  bool
	wg         *sync.WaitGroup
	acks       int // replicas a lease write waits for (WAIT), 0: off
	ackTimeout time.Duration
	lanes      *lanePool
	max        int // batches in flight at most (sendersFor)

	wake chan struct{} // one token per parked sender woken (buffered max)
	quit chan struct{} // closed by close

	mu      sync.Mutex
	queue   []*request
	senders int // senders, sending or parked (at most max)
	parked  int // senders waiting for work, not yet woken
	sending int // batches being sent
	idle    sync.Cond
	closed  bool
	spare   []*request
	flying  map[string]int // keys of the releases being sent, with their count
}

// testHookLook, set by tests only, is called on every sendNext.
var testHookLook atomic.Pointer[func(*batcher)]

func newBatcher(c redisconn.Conn, wg *sync.WaitGroup, cfg config, nodes int) *batcher {
	n := sendersFor(nodes)
	b := &batcher{conn: c, honorsCtx: c.Info().HonorsContext, wg: wg, acks: cfg.replicaAcks, ackTimeout: cfg.ackTimeout, lanes: lanesOf(c), max: n,
		wake: make(chan struct{}, n), quit: make(chan struct{}), flying: map[string]int{}}
	b.idle.L = &b.mu
	return b
}

func (b *batcher) waitIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.sending > 0 || len(b.queue) > 0 {
		b.idle.Wait()
	}
}

// maxSenders bounds the batches in flight to each node of a Redlock: with
// one, a command arriving just after a batch left would wait a whole round
// trip. oneNodeSenders is the bound for a client of one node, whose batches
// are smaller (a lock is one command, not one per node), so that a command
// meets busy senders more often: eight measured level with two on loopback
// and about 40% faster over a link with 1ms each way, where for five nodes
// four cost a fifth of the cycles on loopback (more pipelines for the same
// commands; docs/design.md, Batching).
var maxSenders, oneNodeSenders = 2, 8

// sendersFor is the batches in flight per node for a client of nodes nodes.
func sendersFor(nodes int) int {
	if nodes == 1 {
		return oneNodeSenders
	}
	return maxSenders
}

// senderLinger keeps an idle sender for a steady stream of locks to reuse.
const senderLinger = time.Second

// submit queues qs and makes sure a sender takes them. With inline set (one
// node whose client honours context deadlines), a caller that finds a sender
// slot free sends the batch itself.
func (b *batcher) submit(inline bool, qs ...*request) {
	b.mu.Lock()
	b.queue = append(b.queue, qs...) // together: one batch, in this order
	switch {
	case inline && b.senders < b.max:
	case b.parked > 0:
		b.parked--
		b.mu.Unlock()
		b.wake <- struct{}{}
		return
	case b.senders >= b.max:
		b.mu.Unlock()
		return // a sender will take it
	}
	b.senders++
	b.mu.Unlock()
	if inline && !b.sendNext() {
		return
	}
	b.wg.Add(1)
	go b.loop() // more arrived while the caller sent: a goroutine takes over
}

// loop sends batches, then waits up to senderLinger for more (parked).
func (b *batcher) loop() {
	defer b.wg.Done()
	t := time.NewTimer(senderLinger)
	defer t.Stop()
	for {
		for b.sendNext() {
		}
		b.mu.Lock()
		if b.closed || b.senders >= b.max { // sendNext stopped counting it, and others took its place
			b.mu.Unlock()
			return
		}
		b.senders++
		if b.sendable() { // queued since sendNext looked
			b.mu.Unlock()
			continue
		}
		b.parked++
		b.mu.Unlock()
		t.Reset(senderLinger)
		select {
		case <-b.wake: // the waker counted it off parked
			continue
		case <-b.quit:
			return
		case <-t.C:
		}
		b.mu.Lock()
		if b.parked > 0 {
			b.parked--
			b.senders--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		select { // a submit counted it off parked: its wake is on the way
		case <-b.wake:
		case <-b.quit:
			return
		}
	}
}

// close ends the parked senders, once no call is in flight.
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.quit)
	}
}

// order is how a command is ordered with the releases of its key.
type order uint8

const (
	anyOrder     order = iota
	afterRelease       // an acquire: waits for a release of its key on its way to the node
	isRelease          // a release, which Release may leave on its way (Release)
)

// sendNext sends what is queued as one batch; false: nothing more, stop.
// An acquire whose key has a release on its way to the node stays queued
// until that release is back, so that a Lock right after its Release finds
// the key deleted on every node (docs/design.md, Release).
func (b *batcher) sendNext() bool {
	if h := testHookLook.Load(); h != nil {
		(*h)(b)
	}
	b.mu.Lock()
	batch := b.queue
	b.queue, b.spare = b.spare[:0], nil
	if len(b.flying) > 0 {
		kept := batch[:0]
		for _, q := range batch {
			if b.held(q) {
				b.queue = append(b.queue, q)
			} else {
				kept = append(kept, q)
			}
		}
		clear(batch[len(kept):])
		batch = kept
	}
	if len(batch) == 0 { // another sender took it, or has its releases on the way
		b.spare = batch
		b.senders--
		b.mu.Unlock()
		return false
	}
	b.fly(1, batch...)
	b.sending++
	b.mu.Unlock()

	b.send(batch, b.lanes.take())

	b.mu.Lock()
	defer b.mu.Unlock()
	clear(batch)
	if b.sending--; b.sending == 0 && len(b.queue) == 0 {
		b.idle.Broadcast()
	}
	if b.spare == nil {
		b.spare = batch[:0]
	}
	if !b.sendable() {
		b.senders--
		return false
	}
	return true
}

// sendable reports whether a queued command can go now: not an acquire
// whose key has a release on its way (the sender of that release takes it
// once the release is back). With mu held.
func (b *batcher) sendable() bool {
	if len(b.flying) == 0 {
		return len(b.queue) > 0
	}
	return slices.ContainsFunc(b.queue, func(q *request) bool { return !b.held(q) })
}

// held reports whether q is an acquire one of whose keys has a release on
// its way. With mu held.
func (b *batcher) held(q *request) bool {
	if q.order != afterRelease {
		return false
	}
	for _, k := range lockKeys(q.args) {
		if b.flying[str(k)] > 0 {
			return true
		}
	}
	return false
}

// land counts batch's releases off the ones on their way, before their
// replies are delivered: a caller's next acquire must not wait for them.
func (b *batcher) land(batch ...*request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fly(-1, batch...)
}

// fly adds n to the count of batch's releases on their way, by key. With mu held.
func (b *batcher) fly(n int, batch ...*request) {
	for _, q := range batch {
		if q.order != isRelease {
			continue
		}
		for _, k := range lockKeys(q.args) {
			if b.flying[str(k)] += n; b.flying[str(k)] == 0 {
				delete(b.flying, str(k))
			}
		}
	}
}

// send runs batch on l (nil: the Conn), skipping commands whose round gave
// up, and gives the lane back before delivering, so the next round finds it
// idle. A batch that met a connection closed before it answered (stale) goes
// out once more on a new lane: every lock command may run twice.
func (b *batcher) send(batch []*request, l *lane) {
	live := batch[:0]
	for _, q := range batch {
		if err := q.r.Context().Err(); err != nil {
			b.land(q) // never sent
			q.cmd = redis.NewCmd(q.r.Context(), q.args...)
			q.cmd.SetErr(err)
			q.deliver()
			continue
		}
		live = append(live, q)
	}
	if len(live) == 0 {
		b.lanes.put(l)
		return
	}
	broken, stale := b.sendOn(live, l)
	if broken {
		if l = b.lanes.drop(l, stale); stale { // else l is nil
			if broken, _ = b.sendOn(live, l); broken {
				b.lanes.drop(l, false)
				l = nil
			}
		}
	}
	b.lanes.put(l)
	b.land(live...)
	for _, q := range live {
		q.deliver()
	}
}

// sendOn sends live on l (nil: the Conn), leaving each outcome, replica acks'
// errors included, in its request; broken: l's connection failed, stale:
// it had been closed before it answered.
func (b *batcher) sendOn(live []*request, l *lane) (broken, stale bool) {
	var via sender = b.conn
	if l != nil {
		via = l.l
	}
	ctx := live[0].r.Context()
	if len(live) > 1 {
		// Others still want their replies: run to the latest deadline.
		latest := slices.MaxFunc(live, func(a, b *request) int { return a.r.Deadline().Compare(b.r.Deadline()) })
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(latest.r.Context()), latest.r.Deadline())
		defer cancel()
	}
	pl := l // the lane whose proof the batch uses, none with replica acks (a recheck would need its own WAIT)
	if b.acks > 0 {
		pl = nil
	}
	cmds, proofs := batchCmds(pl, live, false)
	if b.acks > 0 && slices.ContainsFunc(live, b.acked) {
		if l == nil {
			b.sendAcked(ctx, live) // by shard, for a Cluster
			return false, false
		}
		b.pipeAcked(ctx, via, live, cmds)
	} else {
		if len(cmds) == 1 {
			_ = via.Process(ctx, cmds[0])
		} else {
			via.Pipeline(ctx, cmds)
		}
		for _, q := range live {
			retryScript(ctx, via, q.cmd)
		}
	}
	if l != nil {
		if err := connErr(cmds); err != nil { // a write keeps its failed WAIT's error: no vote without it
			return true, ctx.Err() == nil && staleConn(err)
		}
		if proofs && settleProof(pl, live) {
			cmds, _ = batchCmds(pl, live, true)
			pl.l.Pipeline(ctx, cmds)
			for _, q := range live {
				retryScript(ctx, via, q.cmd)
			}
			if err := connErr(cmds); err != nil {
				return true, false
			}
			settleProof(pl, live)
		}
	}
	return false, false
}

// connErr returns the first error of cmds that is the connection's, not a
// server's reply (a redis.Error, redis.Nil included).
func connErr(cmds []*redis.Cmd) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !isReply(err) {
			return err
		}
	}
	return nil
}

// isReply reports whether err is a server's reply; apart from connErr's
// loop so that the loop does not allocate when every command succeeded.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// staleConn reports whether err says the connection had been closed before.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}

// retryScript re-sends into cmd an EVALSHA the node did not know, as EVAL.
func retryScript(ctx context.Context, c sender, cmd *redis.Cmd) {
	if !isNoScript(cmd) {
		return
	}
	e := evalOf(ctx, cmd)
	if e == cmd {
		return // not one of redfence's scripts
	}
	_ = c.Process(ctx, e)
	v, err := e.Result()
	cmd.SetVal(v)
	cmd.SetErr(err)
}

func cmdsOf(qs []*request) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(qs))
	for i, q := range qs {
		cmds[i] = q.cmd
	}
	return cmds
}

// run starts a round of args, with p its proven form or none (proof.go), on
// every node's batcher.
func (e *Client) run(ctx context.Context, o order, need int, timeout time.Duration, args []any, decode decoder, p proof) *quorum.Round[int64] {
	r, reqs := e.prepare(ctx, need, timeout, args, decode)
	for i := range reqs {
		reqs[i].proof, reqs[i].order = p, o
		b := e.nodes[i].batch
		b.submit(len(reqs) == 1 && b.honorsCtx, &reqs[i]) // a batch runs under its requests' own round contexts, not the submitter's
	}
	return r
}

// prepare starts a round for args; the caller submits reqs[i] to node i.
func (e *Client) prepare(ctx context.Context, need int, timeout time.Duration, args []any, decode decoder) (r *quorum.Round[int64], reqs []request) {
	if n := len(e.nodes); n == 1 { // the round and its request in one allocation
		one := new(oneRound)
		r, reqs = &one.r, one.q[:]
		r.Init(ctx, n, need, timeout)
	} else {
		r, reqs = quorum.Begin[int64](ctx, n, need, timeout), make([]request, n)
	}
	for i := range reqs {
		q := &reqs[i]
		q.r, q.index, q.decode, q.args = r, i, decode, args
	}
	return r, reqs
}

// lockKeys returns the keys a lock command names (strings), the node's
// marker left out, which every marked script names.
func lockKeys(args []any) []any {
	var ks []any
	switch {
	case len(args) > 1 && args[0] == "set":
		ks = args[1:2]
	case len(args) > 3 && (args[0] == "evalsha" || args[0] == "eval"):
		if n, ok := args[2].(int); ok && n > 0 && len(args) >= 3+n {
			ks = args[3 : 3+n]
		}
	}
	if n := len(ks); n > 0 && ks[n-1] == keys.Marker {
		ks = ks[:n-1]
	}
	return ks
}

// keyOf returns the first key a lock command names, "" for none.
func keyOf(args []any) string {
	if ks := lockKeys(args); len(ks) > 0 {
		return str(ks[0])
	}
	return ""
}

func str(k any) string {
	s, _ := k.(string)
	return s
}

// oneRound is a round over one node with its request.
type oneRound struct {
	r quorum.Round[int64]
	q [1]request
}
