package fencing

import "context"

// Guard is the resource side of fencing: it remembers, per resource, the
// highest token it has accepted, and rejects lower ones.
//
// Check accepts t if it is at least the highest token recorded for resource
// (equal tokens are accepted, because one holder may write several times)
// and records t when it is higher. A lower t gets a *StaleTokenError
// (errors.Is(err, ErrStaleToken)); t == 0 gets ErrInvalidToken, since 0
// means "no token"; an empty resource gets ErrInvalidArgument. Other errors
// come from the guard's storage.
//
// Check alone does not make a later write safe: between a successful Check
// and the write, a newer holder may pass its own Check and write first. Use
// a method that checks and writes atomically where the guard has one
// (MemoryGuard.Do, RedisGuard.Write, SQLGuard.CheckTx).
type Guard interface {
	Check(ctx context.Context, resource string, t Token) error
}

var (
	_ Guard = (*MemoryGuard)(nil)
	_ Guard = (*RedisGuard)(nil)
	_ Guard = (*SQLGuard)(nil)
)
