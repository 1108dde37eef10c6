package redlock

import (
	"time"

	"github.com/redfence/redfence/internal/keys"
)

// WithoutClockFloor turns the clock floor of fencing tokens off: tokens come
// from the counters alone, as before the floor. It is the control of the
// lost-write tests.
func WithoutClockFloor() Option {
	return optionFunc(func(c *config) { c.noClockFloor = true })
}

// SetClock replaces the clock that measures elapsed time in c's acquires and
// extends. Call it before using c.
func SetClock(c *Client, now func() time.Time) { c.now = now }

// WakeState reports how many Lock calls of c wait for the full key and on
// how many nodes c has the key's grant channel subscribed.
func WakeState(c *Client, key string) (waiting, subscribed int) {
	w := c.wait
	if w == nil {
		return 0, 0
	}
	waiting = w.waiting(key)
	w.notes.mu.Lock()
	defer w.notes.mu.Unlock()
	if s := w.notes.subs[key]; s != nil {
		subscribed = confirmed(s)
	}
	return waiting, subscribed
}

// OnSettledWaiter calls f each time a Lock of c waiting for key is about to
// block with nothing to do: every node has confirmed the key's subscription
// (so no confirmation will ask it for another refresh), and no grant or
// refresh is pending, so it waits for a grant or its own retry delay. One
// test at a time may set it; the returned func unsets it.
func OnSettledWaiter(c *Client, key string, f func()) (unset func()) {
	h := func(st *waitState) {
		if st.m.e != c || st.m.key != key || len(st.wt.ch) > 0 {
			return
		}
		st.wt.mu.Lock()
		pending := st.wt.refresh || len(st.wt.notes) > 0
		st.wt.mu.Unlock()
		if _, subscribed := WakeState(c, key); !pending && subscribed == len(c.nodes) {
			f()
		}
	}
	testHookParks.Store(&h)
	return func() { testHookParks.Store(nil) }
}

// confirmed counts the nodes that confirmed s's subscription.
func confirmed(s *keySub) (n int) {
	for _, c := range s.conf {
		if c {
			n++
		}
	}
	return n
}

// The key layout (docs/design.md, Keys) and the Cluster slot of a key.
var (
	FenceKeyOf   = keys.Fence
	ReadersKeyOf = keys.ReadersOf
	IntentKeyOf  = keys.Intent
	SlotOf       = slotOf
)

// MarkerKey is the node's restart-quarantine marker.
const MarkerKey = keys.Marker

// DefaultQuarantine is the restart quarantine over several nodes when no
// WithQuarantine is given.
const DefaultQuarantine = defaultQuarantine
