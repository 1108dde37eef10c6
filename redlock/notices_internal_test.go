package redlock

import (
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/keys"
)

// newTestWaiting returns the wake-up state over n nodes without pub/sub
// clients: the bookkeeping runs, no goroutine starts.
func newTestWaiting(n, need int) *waiting {
	return newWaiting(make([]node, n), slog.New(slog.DiscardHandler))
}

// woken reports whether wt was poked, and what it was told.
func woken(wt *waiter) (bool, []grantNote, bool) {
	select {
	case <-wt.ch:
		notes, refresh := wt.take()
		return true, notes, refresh
	default:
		return false, nil, false
	}
}

func TestNoticesUnwantKeepsAChannelAWaiterWants(t *testing.T) {
	w := newTestWaiting(1, 1)
	wt := w.join("k", "v1")
	w.notes.watch("k")
	// The queue emptied and refilled between a leave and its unwant: the
	// channel stays wanted for the new waiter.
	w.notes.unwant("k")
	assert.True(t, w.notes.subs["k"].wanted)

	w.leave(wt)
	assert.NotContains(t, w.notes.subs, "k", "nobody waits and no node has it subscribed: forgotten")
}

func TestNoticesConfirmationPokesWaiters(t *testing.T) {
	w := newTestWaiting(3, 2)
	a, b := w.join("k", "va"), w.join("k", "vb")
	other := w.join("x", "vx")
	w.notes.watch("k")
	s := w.notes.subs["k"]
	s.sent[0], s.sent[1] = true, true // as runNode would have
	confirm := func(i int) {
		w.notes.subscription(i, &redis.Subscription{Kind: "subscribe", Channel: grantChannel("k", w.notes.id)})
	}
	confirm(2) // never sent there: ignored
	got, _, _ := woken(a)
	assert.False(t, got)
	confirm(0)
	for _, wt := range []*waiter{a, b} {
		got, _, refresh := woken(wt)
		assert.True(t, got && refresh, "a grant announced before node 0 subscribed may have been missed")
	}
	got, _, _ = woken(other)
	assert.False(t, got, "another key's waiter")
	confirm(0) // already counted
	got, _, _ = woken(a)
	assert.False(t, got)
	confirm(1)
	assert.Equal(t, 2, confirmed(s))
	w.notes.lost(1)
	assert.Equal(t, 1, confirmed(s), "a broken connection confirms nothing until resubscribed")
	w.leave(a)
	w.leave(b)
	w.leave(other)
}

func TestNoticesGrants(t *testing.T) {
	w := newTestWaiting(3, 2)
	a, b := w.join("k", "va"), w.join("k", "vb")
	msg := func(node int, channel, payload string) {
		w.notes.message(node, &redis.Message{Channel: channel, Payload: payload})
	}
	msg(1, grantChannel("k", w.notes.id), "g:va:3")
	msg(2, grantChannel("k", w.notes.id), "g:va:4")
	msg(0, "elsewhere:k", "g:va:5")                    // not a release channel
	msg(0, keys.ReleasedPrefix+"k#other", "g:va:6")    // another engine's channel
	msg(0, grantChannel("k", w.notes.id), "g:va:x")    // no round
	msg(0, grantChannel("k", w.notes.id), "released")  // not a grant
	msg(0, grantChannel("k", w.notes.id), "g:other:1") // another engine's waiter
	got, notes, refresh := woken(a)
	assert.True(t, got)
	assert.False(t, refresh)
	assert.Equal(t, []grantNote{{node: 1, round: 3}, {node: 2, round: 4}}, notes, "each grant with its node and round")
	got, _, _ = woken(b)
	assert.False(t, got, "a grant is its waiter's alone")
	w.leave(a)
	w.leave(b)
	msg(1, grantChannel("k", w.notes.id), "g:va:3") // after leave: nobody to tell
}
