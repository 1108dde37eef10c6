package single

import (
	"time"

	"github.com/redfence/redfence/internal/core"
)

// WithoutClockFloor turns the clock floor of fencing tokens off: tokens come
// from the counters alone, as before the floor. It is the control of the
// lost-write tests.
func WithoutClockFloor() Option {
	return core.OptionOf(func(c *core.Config) { c.DisableClockFloor() }).(Option)
}

// SetClock replaces the clock that measures elapsed time in c's acquires and
// extends. Call it before using c.
func SetClock(c *Client, now func() time.Time) { core.EngineOf(c).SetClock(now) }

// WakeState reports how many Lock calls of c wait for the full key and on
// how many nodes c has the key's release channel subscribed.
func WakeState(c *Client, key string) (waiting, subscribed int) {
	return core.EngineOf(c).WakeState(key)
}
