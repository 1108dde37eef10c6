package single

import "time"

// SetClock replaces the clock that measures elapsed time in c's acquires and
// extends. Call it before using c.
func SetClock(c *Client, now func() time.Time) { c.e.SetClock(now) }
