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

// kill kills n and remembers it is down.
func (r *run) kill(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Kill(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.down[n], r.paused[n] = true, false
	r.mu.Unlock()
	return nil
}

// restart starts a killed n again.
func (r *run) restart(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.down[n] = false
	r.mu.Unlock()
	return nil
}

// pause freezes n.
func (r *run) pause(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(ctx)
	defer cancel()
	if err := n.Pause(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.paused[n] = true
	r.mu.Unlock()
	return nil
}

// resume thaws n. It uses a context detached from ctx's cancellation, so
// that a cancelled run does not leave a node frozen.
func (r *run) resume(ctx context.Context, n Node) error {
	ctx, cancel := nodeCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := n.Resume(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.paused[n] = false
	r.mu.Unlock()
	return nil
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
