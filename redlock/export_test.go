package redlock

import "time"

// SetClock replaces the clock that measures elapsed time in c's acquires and
// extends. Call it before using c.
func SetClock(c *Client, now func() time.Time) { c.e.SetClock(now) }

// WakeState reports how many Lock calls of c wait for the full key and on
// how many nodes c has the key's release channel subscribed.
func WakeState(c *Client, key string) (waiting, subscribed int) { return c.e.WakeState(key) }
