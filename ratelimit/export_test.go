package ratelimit

import "time"

// PinClock makes l's scripts use now() instead of the Redis server's clock,
// so that tests can put requests exactly on either side of a boundary.
func PinClock(l *Limiter, now func() time.Time) { l.now = now }

// Keys returns the Redis keys l uses for key.
func Keys(l *Limiter, key string) []string { return l.keys(key) }

// Queued returns how many calls wait for a batch to send them (pipe.go).
func Queued(l *Limiter) int {
	l.pipe.mu.Lock()
	defer l.pipe.mu.Unlock()
	return len(l.pipe.queue)
}

// MaxBatches is how many batches a Limiter has in flight at most.
const MaxBatches = maxBatches
