package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// each runs f on every node in parallel and joins the errors.
func each(nodes []Node, f func(Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func nodeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, nodeOpTimeout)
}

// nodeOp runs op, a node operation bounded by nodeOpTimeout, and once it
// has succeeded records its effect with record, under r.mu.
func (r *run) nodeOp(ctx context.Context, op func(ctx context.Context) error, record func()) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := op(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	record()
	r.mu.Unlock()
	return nil
}

// kill kills n and remembers it is down.
func (r *run) kill(ctx context.Context, n Node) error {
	return r.nodeOp(ctx, n.Kill, func() { r.down[n], r.paused[n] = true, false })
}

// restart starts a killed n again.
func (r *run) restart(ctx context.Context, n Node) error {
	return r.nodeOp(ctx, n.Start, func() { r.down[n] = false })
}

// pause freezes n.
func (r *run) pause(ctx context.Context, n Node) error {
	return r.nodeOp(ctx, n.Pause, func() { r.paused[n] = true })
}

// resume thaws n. It uses a context detached from ctx's cancellation, so
// that a cancelled run does not leave a node frozen.
func (r *run) resume(ctx context.Context, n Node) error {
	return r.nodeOp(context.WithoutCancel(ctx), n.Resume, func() { r.paused[n] = false })
}

// fault records the start of a fault window and returns its end, which
// may be called any number of times; windows still open when the run
// finishes are closed then.
func (r *run) fault(format string, args ...any) (end func()) {
	stop := r.h.Fault(fmt.Sprintf(format, args...))
	var once sync.Once
	end = func() { once.Do(func() { stop() }) }
	r.mu.Lock()
	r.openFault = append(r.openFault, end)
	r.mu.Unlock()
	return end
}

// healed records now as the run's heal, for the recovery time.
func (r *run) healed() {
	now := r.h.Now()
	r.mu.Lock()
	r.heal = now
	r.mu.Unlock()
}
