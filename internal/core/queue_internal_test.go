package core

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// woke reports why wt was poked since the last look, draining its channel.
func woke(qs *keyQueues, wt *waiter) (bool, wakeKind) {
	select {
	case <-wt.ch:
		return true, qs.woken(wt)
	default:
		return false, wakeNone
	}
}

func TestKeyQueuesFIFO(t *testing.T) {
	qs := newKeyQueues()
	a, b, c := qs.join("k"), qs.join("k"), qs.join("k")
	other := qs.join("other")

	ok, _ := qs.turn(a)
	assert.True(t, ok, "the first caller is the head")
	ok, why := qs.turn(c)
	assert.False(t, ok)
	assert.Equal(t, turnError{ahead: 2}, why, "c waits behind a and b")
	ok, _ = qs.turn(other)
	assert.True(t, ok, "queues are per key")
	assert.Equal(t, 3, qs.waiting("k"))

	// b leaves from the middle: nobody is woken, c moves up.
	assert.False(t, qs.leave("k", b))
	got, _ := woke(qs, c)
	assert.False(t, got)
	_, why = qs.turn(c)
	assert.Equal(t, turnError{ahead: 1}, why)

	// The head leaves: the next one is woken, locally.
	assert.False(t, qs.leave("k", a))
	got, k := woke(qs, c)
	assert.True(t, got)
	assert.Equal(t, wakeLocal, k)
	ok, _ = qs.turn(c)
	assert.True(t, ok)

	assert.True(t, qs.leave("k", c), "the last waiter leaves the queue idle")
	assert.Equal(t, 0, qs.waiting("k"))
	assert.NotContains(t, qs.queues, "k", "an idle queue without holders is dropped")
	assert.True(t, qs.leave("other", other))
}

func TestKeyQueuesHolders(t *testing.T) {
	qs := newKeyQueues()
	qs.hold("k")
	qs.hold("k")
	wt := qs.join("k")
	ok, why := qs.turn(wt)
	assert.False(t, ok, "a lease of this engine holds the key")
	assert.Equal(t, turnError{held: true}, why)

	assert.False(t, qs.unhold("k"))
	got, _ := woke(qs, wt)
	assert.False(t, got, "one lease still holds the key")

	assert.False(t, qs.unhold("k"), "the waiter is still there")
	got, k := woke(qs, wt)
	assert.True(t, got, "the last lease's end wakes the head")
	assert.Equal(t, wakeLocal, k)
	ok, _ = qs.turn(wt)
	assert.True(t, ok)

	assert.True(t, qs.leave("k", wt))
	assert.NotContains(t, qs.queues, "k")

	// A queue with a holder and no waiter stays until the holder ends.
	qs.hold("k")
	assert.Contains(t, qs.queues, "k")
	assert.True(t, qs.unhold("k"))
	assert.NotContains(t, qs.queues, "k")
}

func TestKeyQueuesWokenWhileHeld(t *testing.T) {
	qs := newKeyQueues()
	wt := qs.join("k")
	qs.hold("k")
	qs.wake("k", wakeRemote)
	got, k := woke(qs, wt)
	assert.True(t, got)
	assert.Equal(t, wakeNone, k, "the key is held by a lease of this engine: its end wakes the head")
}

func TestKeyQueuesNotices(t *testing.T) {
	qs := newKeyQueues()
	qs.notice("k", "x", 2) // nobody waits: not counted
	head, second := qs.join("k"), qs.join("k")

	qs.notice("k", "r1", 3)
	qs.notice("k", "r1", 3)
	got, _ := woke(qs, head)
	assert.False(t, got, "2 of 3 nodes announced the release")
	qs.notice("k", "r2", 3) // another release: the count starts again
	qs.notice("k", "r2", 3)
	got, _ = woke(qs, head)
	assert.False(t, got)
	qs.notice("k", "r2", 3)
	got, k := woke(qs, head)
	assert.True(t, got, "a quorum announced the same release")
	assert.Equal(t, wakeRemote, k)
	got, _ = woke(qs, second)
	assert.False(t, got, "only the head is woken")

	// A local wake-up is not downgraded by a remote one after it.
	qs.wake("k", wakeLocal)
	qs.wake("k", wakeRemote)
	_, k = woke(qs, head)
	assert.Equal(t, wakeLocal, k)

	// The count ends with the last waiter, also while a lease of this
	// engine keeps the queue.
	qs.hold("k")
	qs.notice("k", "r3", 2)
	qs.leave("k", second)
	qs.leave("k", head)
	again := qs.join("k")
	qs.notice("k", "r3", 2)
	got, _ = woke(qs, again)
	assert.False(t, got, "a notice counted for the waiters that left does not count for a new one")
	qs.leave("k", again)
	qs.unhold("k")
}

func TestKeyQueuesSpareWaiterForgetsLateWakeUp(t *testing.T) {
	qs := newKeyQueues()
	a := qs.join("k")
	b := qs.join("k")
	qs.leave("k", a) // wakes b
	qs.wake("k", wakeRemote)
	qs.leave("k", b) // b leaves with a wake-up in its channel
	c := qs.join("k")
	got, _ := woke(qs, c)
	assert.False(t, got, "a reused waiter starts without the wake-up of its last user")
	qs.leave("k", c)
}

func TestKeyQueuesPark(t *testing.T) {
	ctx := context.Background()
	qs := newKeyQueues()
	head := qs.join("k")
	second := qs.join("k")
	assert.Nil(t, qs.park(nil, head, ctx), "no lease of this engine holds the key: nothing to hand over")

	qs.hold("k")
	assert.Nil(t, qs.park(nil, second, ctx), "only the head parks")
	p := qs.park(nil, head, ctx)
	require.NotNil(t, p)
	assert.Nil(t, qs.park(nil, head, ctx), "one parked acquire at a time")
	assert.True(t, qs.hasParked("k"))

	// A releaser that is not the only holder does not take it.
	qs.hold("k")
	require.Nil(t, qs.takeParked("k"))
	qs.unhold("k")

	// Withdrawn before a releaser took it.
	assert.Nil(t, qs.unpark(p))
	assert.False(t, qs.hasParked("k"))
	assert.Nil(t, qs.takeParked("k"))

	// Taken by the releaser: unpark waits for the round it started.
	p = qs.park(nil, head, ctx)
	require.NotNil(t, p)
	assert.Same(t, p, qs.takeParked("k"))
	assert.Nil(t, qs.takeParked("k"), "taken once")
	p.got <- handed{value: p.value}
	h := qs.unpark(p)
	require.NotNil(t, h)
	assert.Equal(t, p.value, h.value)

	qs.unhold("k")
	qs.leave("k", second)
	qs.leave("k", head)
	assert.Empty(t, qs.queues)
}
