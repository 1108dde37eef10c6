package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/redlock"
)

// newWorkload returns the workload of client slots 0..clients-1, over the
// run's guard, control counter and key.
func (r *run) newWorkload(clients int) *Workload {
	lockers := make([]Locker, clients)
	for i := range lockers {
		lockers[i] = ambiguityLocker(r.clients[i].try)
	}
	return &Workload{
		Lockers:  lockers,
		Guard:    r.guard,
		Resource: r.resource,
		control:  r.control,
		Backoff:  workloadBackoff,
		Seed:     r.opts.Seed,
	}
}

// workload runs the workload of client slots 0..clients-1 for d while
// faults (if not nil) runs with a context that ends with the workload
// (wctx: for its timing; node operations should use ctx), and joins both.
func (r *run) workload(ctx context.Context, clients int, d time.Duration, faults func(wctx context.Context, start time.Time) error) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		fErr error
	)
	if faults != nil {
		wg.Go(func() { fErr = faults(wctx, start) })
	}
	_, wErr := r.newWorkload(clients).Run(wctx, r.h)
	wg.Wait()
	return errors.Join(wErr, fErr, ctx.Err())
}

// alongside runs the workload of client slots 0..clients-1 while script
// runs, for at least minDur and until tail after script returns, and joins
// both. script gets ctx.
func (r *run) alongside(ctx context.Context, clients int, minDur, tail time.Duration, script func(ctx context.Context) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		wErr error
	)
	wg.Go(func() { _, wErr = r.newWorkload(clients).Run(wctx, r.h) })
	sErr := script(ctx)
	until := time.Now().Add(tail)
	if m := start.Add(minDur); m.After(until) {
		until = m
	}
	sleepUntil(ctx, until)
	cancel()
	wg.Wait()
	return errors.Join(sErr, wErr, ctx.Err())
}

// sleepUntil waits until t or until ctx ends; it reports whether t came.
func sleepUntil(ctx context.Context, t time.Time) bool { return wait(ctx, time.Until(t), nil) }

// waitFor polls the history until cond holds or timeout passes; it
// reports whether cond held.
func (r *run) waitFor(ctx context.Context, timeout time.Duration, cond func(ops []Op) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(r.h.Ops()) {
			return true
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return false
		}
	}
}

// classifyRelease marks a failed release as ambiguous unless the lease was
// definitely gone (lost or already released): a release whose replies were
// lost may still have deleted the keys.
func classifyRelease(err error) error {
	if err == nil || errors.Is(err, redlock.ErrLost) || errors.Is(err, redlock.ErrReleased) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrAmbiguous, err)
}

// releaseClassifier wraps a lease so that Release reports ambiguous
// failures as such; Done is passed through for the workload.
type releaseClassifier struct{ heldLease }

func (l releaseClassifier) Release(ctx context.Context) error {
	return classifyRelease(l.heldLease.Release(ctx))
}

// ambiguityLocker is a Locker over try whose leases classify their release
// errors (see classifyRelease).
func ambiguityLocker(try func(ctx context.Context) (heldLease, error)) Locker {
	return LockerFunc(func(ctx context.Context) (Lease, error) {
		l, err := try(ctx)
		if err != nil {
			return nil, err
		}
		return releaseClassifier{l}, nil
	})
}

// scriptedAcquire is a granted acquire by a scripted client, whose
// operation may be completed later (see acquire).
type scriptedAcquire struct {
	lease heldLease
	p     *Pending
	ret   time.Time // when TryLock returned
	op    Op        // the completed operation, once completed
}

// complete records the acquire's operation: returned when TryLock did,
// valid until validUntil (the lease's validity at the end of its life for
// a kept-alive lease).
func (a *scriptedAcquire) complete(h *History, validUntil time.Time) Op {
	ret := h.At(a.ret)
	a.op = a.p.Complete(OK, WithToken(a.lease.Token()), fieldFunc(func(op *Op, _ time.Time) {
		op.Return = max(ret, op.Call)
		op.ValidUntil = h.At(validUntil)
	}))
	return a.op
}

// acquire makes TryLock attempts as client c, each recorded as an Acquire,
// every 50ms until one succeeds or until the deadline; it returns the
// granted one, or nil. The granted operation is completed at once unless
// deferComplete is set (for a lease kept alive: complete it when it ends).
func (r *run) acquire(ctx context.Context, c int, deadline time.Time, deferComplete bool) *scriptedAcquire {
	for {
		if a, _, err := r.attempt(ctx, c, deferComplete); err == nil {
			return a
		}
		if !time.Now().Before(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return nil
		}
	}
}

// attempt makes one TryLock attempt as client c, recorded as an Acquire
// (see acquire): the granted acquire, or the failed operation and why.
func (r *run) attempt(ctx context.Context, c int, deferComplete bool) (*scriptedAcquire, Op, error) {
	actx, cancel := context.WithTimeout(ctx, defaultAcquireTimeout)
	p := r.h.Invoke(c, Acquire)
	l, err := r.clients[c].try(actx)
	ret := time.Now()
	cancel()
	if err != nil {
		return nil, p.Complete(outcome(err), WithErr(err)), err
	}
	a := &scriptedAcquire{lease: l, p: p, ret: ret}
	if !deferComplete {
		a.complete(r.h, l.ValidUntil())
	}
	return a, a.op, nil
}

// scriptWarmup is how long the workload runs before a scripted client
// that contends with it takes the lock.
const scriptWarmup = 300 * time.Millisecond

// warmThenAcquire runs the workload of client slots 0..a-1 for
// scriptWarmup, then, with the lock free of them, acquires as client a
// (see acquire): a scripted client retrying against a running workload can
// be starved, since a workload client tries again the moment it releases.
// It returns nil, and records the fact, if client a never acquired.
func (r *run) warmThenAcquire(ctx context.Context, a int, deferComplete bool) (*scriptedAcquire, error) {
	if err := r.workload(ctx, a, scriptWarmup, nil); err != nil {
		return nil, err
	}
	acq := r.acquire(ctx, a, time.Now().Add(2*r.ttl), deferComplete)
	if acq == nil {
		r.fact("the scripted client never acquired")
	}
	return acq, nil
}

// fencedWrite writes value to the fenced resource as client c with the
// token of the lease acquired by acq, recording it as a FencedWrite.
func (r *run) fencedWrite(ctx context.Context, c int, acq Op, value string) Op {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultOpTimeout)
	defer cancel()
	p := r.h.Invoke(c, FencedWrite)
	err := r.guard.Check(wctx, r.resource, acq.Token)
	fields := []Field{WithToken(acq.Token), WithLease(acq.ID), WithValue(value), WithErr(err)}
	switch {
	case err == nil:
		return p.Complete(OK, fields...)
	case errors.Is(err, fencing.ErrStaleToken):
		return p.Complete(Fail, append(fields, WithNote(NoteStale))...)
	case errors.Is(err, fencing.ErrInvalidToken), errors.Is(err, fencing.ErrInvalidArgument):
		return p.Complete(Fail, fields...)
	}
	return p.Complete(Unknown, fields...)
}

// release releases a scripted lease as client c, recording it.
func (r *run) release(ctx context.Context, c int, a *scriptedAcquire) Op {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultOpTimeout)
	defer cancel()
	p := r.h.Invoke(c, Release)
	err := classifyRelease(a.lease.Release(rctx))
	return p.Complete(outcome(err), WithLease(a.op.ID), WithToken(a.op.Token), WithErr(err))
}

// fact records a finding for the result's note.
func (r *run) fact(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.facts = append(r.facts, fmt.Sprintf(format, args...))
}

// allNodes returns 0..n-1.
func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// onNode runs f with a fresh client straight to n (no proxy, no fault),
// closed afterwards: a pooled connection would not survive a restart of n.
// An attempt that times out (a node slow to answer on a loaded machine: a
// soak's FLUSHALL once took longer than the client's read timeout) is
// made again with a new client, all within nodeOpTimeout, so f must be
// safe to repeat; every other error is returned at once.
func (r *run) onNode(ctx context.Context, n Node, f func(ctx context.Context, c *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, nodeOpTimeout)
	defer cancel()
	for {
		err := withClient(ctx, nodeOpTimeout, "on "+n.Name(), adminClient(n.Addr()), f)
		if err == nil || !isTimeout(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(onNodeRetryPause):
		}
	}
}

// onNodeRetryPause is onNode's pause before it tries a timed-out f again.
const onNodeRetryPause = 100 * time.Millisecond

// isTimeout reports whether err is a network timeout (a read, write or
// dial deadline that passed).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// withClient runs f with c, a fresh client, bounded by timeout, and closes
// c afterwards; its error says what c was.
func withClient[C io.Closer](ctx context.Context, timeout time.Duration, what string, c C, f func(ctx context.Context, c C) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(ctx, c)
	if cErr := c.Close(); cErr != nil {
		err = errors.Join(err, cErr)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// replicaOf makes c's node a replica of primary (host:port).
func replicaOf(ctx context.Context, c *redis.Client, primary string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return err
	}
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("replicaof: %w", err)
	}
	return nil
}

// replicate makes rc's node a replica of primary and waits until its link
// to the primary is up.
func replicate(ctx context.Context, rc *redis.Client, primary string) error {
	if err := replicaOf(ctx, rc, primary); err != nil {
		return err
	}
	return waitReplicaUp(ctx, rc, 10*time.Second)
}

// waitReplicaUp waits until the replica reports its link to the primary up.
func waitReplicaUp(ctx context.Context, rc *redis.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if !time.Now().Before(deadline) {
			if err == nil {
				err = errors.New("master_link_status is not up")
			}
			return fmt.Errorf("the replica's link to the primary did not come up within %v: %w", timeout, err)
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
}
