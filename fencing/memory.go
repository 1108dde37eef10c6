package fencing

import (
	"context"
	"sync"
)

// MemoryGuard is a Guard that keeps the highest token per resource in a map
// in this process. It suits tests and resources that live in one process;
// its fences are lost when the process exits. The zero value is ready to use
// and a MemoryGuard is safe for concurrent use.
type MemoryGuard struct {
	mu     sync.Mutex
	fences map[string]Token // guarded by mu; created on first use
}

// NewMemoryGuard returns an empty MemoryGuard.
func NewMemoryGuard() *MemoryGuard { return &MemoryGuard{} }

// Check implements Guard. It fails only on invalid arguments, a stale token,
// or a ctx that is already done.
func (g *MemoryGuard) Check(ctx context.Context, resource string, t Token) error {
	if g == nil {
		return invalid("guard", "Check on a nil *MemoryGuard")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(ctx, resource, t)
}

// Do runs fn under the guard's lock if t is accepted for resource (see
// Guard), so the check and fn's write are one atomic step. It returns the
// check's error without running fn, or fn's error; t stays recorded even if
// fn fails. fn must not call the guard (it would deadlock) and should be
// short: every Check and Do on the guard waits for it.
func (g *MemoryGuard) Do(resource string, t Token, fn func() error) error {
	if g == nil {
		return invalid("guard", "Do on a nil *MemoryGuard")
	}
	if fn == nil {
		return invalid("function", "Do with a nil function")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitLocked(context.Background(), resource, t); err != nil {
		return err
	}
	return fn()
}

// admitLocked checks t against resource's fence and records it.
func (g *MemoryGuard) admitLocked(ctx context.Context, resource string, t Token) (err error) {
	defer func() { memoryMetrics().record(ctx, err) }()
	if err := validate(resource, t); err != nil {
		return err
	}
	cur := g.fences[resource]
	if t < cur {
		return &StaleTokenError{Resource: resource, Token: t, Current: cur}
	}
	if t > cur {
		if g.fences == nil {
			g.fences = make(map[string]Token)
		}
		g.fences[resource] = t
	}
	return nil
}
