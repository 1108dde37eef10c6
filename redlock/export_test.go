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
