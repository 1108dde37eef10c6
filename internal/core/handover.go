package core

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/quorum"
)

// releaseAnnounced is releaseAll with a release notice: each node that
// deletes the key publishes id on the key's channel. With handOver set it
// gives up the lease's holder slot (waking the next waiter) as soon as a
// quorum of nodes has deleted the key, so that the next waiter need not wait
// for the slowest nodes, or when the round ends if they never do.
func (m *Mutex) releaseAnnounced(ctx context.Context, value, id string, handOver bool) *quorum.Round[int64] {
	st := &releaseState{m: m, handOver: handOver}
	// releaseTmpl is EVALSHA, the script, 1 key, the key, and the value;
	// the channel and the message follow.
	n := copy(st.args[:], m.releaseTmpl)
	st.args[n-1], st.args[n], st.args[n+1] = value, m.channelArg, id
	var r *quorum.Round[int64]
	if p := m.handover(handOver); p != nil {
		// The next waiter's acquire goes right behind the delete, on every
		// node, in the same batch.
		var rel []request
		r, rel = m.e.prepare(ctx, len(m.e.nodes), m.cfg.RoundTimeout(), st.args[:n+2], st.decode)
		start := m.e.now()
		next, acq := m.e.prepare(p.ctx, // the waiter's context: the acquire is the waiter's
			m.need, p.m.cfg.RoundTimeout(), p.m.acquireArgs(p.value), p.m.acquireDecoder())
		m.e.sendPaired(rel, acq) // a batch runs under its requests' own round contexts, not the submitter's
		p.got <- handed{r: next, start: start, value: p.value}
	} else {
		r = m.e.run(ctx, len(m.e.nodes), m.cfg.RoundTimeout(), st.args[:n+2], st.decode)
	}
	r.Wait()
	st.handOff() // the subscriptions run under the waker's own lifetime, not a caller's
	return r
}

// handover returns the next waiter's parked acquire, when this release may
// send it (see parked).
func (m *Mutex) handover(handOver bool) *parked {
	if !handOver {
		return nil
	}
	return m.e.wake.takeParked(m.key)
}

// releaseState is one releaseAnnounced round's state, in one allocation.
type releaseState struct {
	m        *Mutex
	handOver bool
	args     [7]any
	deleted  atomic.Int32
	done     atomic.Bool
}

// decode reads one node's reply as releaseAll does, and hands the key over
// once a quorum of nodes has deleted it. It runs on the nodes' goroutines.
func (st *releaseState) decode(cmd *redis.Cmd) (int64, error) {
	n, err := decodeOne(cmd)
	if err == nil && int(st.deleted.Add(1)) == st.m.need {
		st.handOff()
	}
	return n, err
}

// handOff gives up the holder slot, once.
func (st *releaseState) handOff() {
	if st.handOver && st.done.CompareAndSwap(false, true) {
		st.m.e.wake.unhold(st.m.key)
	}
}

// parked is an acquire the head of a queue has prepared while a lease of the
// engine holds the key: the lease's Release sends it on every node in the
// same batch as the release, right after it (Engine.sendPaired), so the next
// holder's SET follows the delete in one round trip instead of two. It is an
// ordinary acquire (its own value, start, round and deadline, under the
// waiter's context); only who sends it, and when, differ.
type parked struct {
	wt    *waiter
	m     *Mutex
	ctx   context.Context
	value string
	got   chan handed // buffered 1: the releaser never blocks
}

// handed is a parked acquire's round, started by the releaser.
type handed struct {
	r     *quorum.Round[int64]
	start time.Time // taken before anything was sent
	value string
}
