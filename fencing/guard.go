package fencing

import "context"

// Guard is the resource side of fencing: it remembers, per resource, the
// highest token it has accepted, and rejects lower ones. See
// docs/fencing.md, Guards.
type Guard interface {
	// Check accepts t if it is at least the highest token recorded for
	// resource (equal tokens pass: one holder may write several times), and
	// records it. It returns a *StaleTokenError for a lower t,
	// ErrInvalidToken for t == 0, ErrInvalidArgument for an empty resource,
	// and otherwise only storage errors. Check alone does not make a later
	// write safe: a newer holder may write in between. Use the guard's
	// atomic form (MemoryGuard.Do, RedisGuard.Write, SQLGuard.CheckTx).
	Check(ctx context.Context, resource string, t Token) error
}

var (
	_ Guard = (*MemoryGuard)(nil)
	_ Guard = (*RedisGuard)(nil)
	_ Guard = (*SQLGuard)(nil)
)
