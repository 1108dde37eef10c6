package core

import (
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// newTestNotices returns notices over n nodes without pub/sub clients: the
// bookkeeping runs, no goroutine starts.
func newTestNotices(n, need int) (*notices, *keyQueues) {
	qs := newKeyQueues()
	ns := newNotices(make([]Node, n), need, slog.New(slog.DiscardHandler), qs)
	return ns, qs
}

func TestNoticesUnwantKeepsAChannelAWaiterWants(t *testing.T) {
	ns, qs := newTestNotices(1, 1)
	wt := qs.join("k")
	ns.watch("k")
	// The queue emptied and refilled between a leave and its unwant: the
	// channel stays wanted for the new waiter.
	ns.unwant("k")
	assert.True(t, ns.subs["k"].wanted)

	qs.leave("k", wt)
	ns.unwant("k")
	assert.NotContains(t, ns.subs, "k", "nobody waits and no node has it subscribed: forgotten")
}

func TestNoticesConfirmationWakesHead(t *testing.T) {
	ns, qs := newTestNotices(3, 2)
	wt := qs.join("k")
	ns.watch("k")
	s := ns.subs["k"]
	s.sent[0], s.sent[1] = true, true // as runNode would have
	confirm := func(i int) {
		ns.subscription(i, &redis.Subscription{Kind: "subscribe", Channel: ReleasedChannel("k")})
	}
	confirm(0)
	got, _ := woke(qs, wt)
	assert.False(t, got, "1 of the 2 confirmations needed")
	confirm(2) // never sent there: ignored
	confirm(0) // already counted
	got, _ = woke(qs, wt)
	assert.False(t, got)
	confirm(1)
	got, k := woke(qs, wt)
	assert.True(t, got, "a release announced before a quorum subscribed may have been missed")
	assert.Equal(t, wakeLocal, k)
	assert.Equal(t, 2, s.nconf)

	ns.lost(1)
	assert.Equal(t, 1, s.nconf, "a broken connection confirms nothing until resubscribed")
	qs.leave("k", wt)
}

func TestNoticesMessages(t *testing.T) {
	ns, qs := newTestNotices(3, 2)
	wt := qs.join("k")
	msg := func(payload string) {
		ns.message(&redis.Message{Channel: ReleasedChannel("k"), Payload: payload})
	}
	own := ns.noticeID()
	msg(own)
	msg(own)
	got, _ := woke(qs, wt)
	assert.False(t, got, "the engine's own releases wake their waiters themselves")
	msg("other.1")
	ns.message(&redis.Message{Channel: "elsewhere:k", Payload: "other.1"})
	got, _ = woke(qs, wt)
	assert.False(t, got)
	msg("other.1")
	got, k := woke(qs, wt)
	assert.True(t, got, "a quorum announced another client's release")
	assert.Equal(t, wakeRemote, k)
	assert.NotEqual(t, own, ns.noticeID(), "notice ids are unique")
	qs.leave("k", wt)
}
