package locktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// closeWait is a waiting call of a lock shape for closeDuringWait: hold
// takes what keeps the call waiting (with a Client of its own) and returns
// its leases; wait is the call, on key, with the given options.
type closeWait struct {
	name string
	hold func(ctx context.Context, t *testing.T, c *redlock.Client, key string) []*redlock.Lease
	wait func(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) waitingCall
}

// The waiting calls of the semaphore (two permits, both held), and of the
// read-write lock: RLock while a writer holds, Lock while a reader holds.
var (
	closeAcquire = closeWait{"Acquire",
		func(ctx context.Context, t *testing.T, c *redlock.Client, key string) []*redlock.Lease {
			s := sem(t, c, key, 2)
			return []*redlock.Lease{takeSem(ctx, t, s), takeSem(ctx, t, s)}
		},
		func(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) waitingCall {
			return sem(t, c, key, 2, o...).Acquire
		}}
	closeRLock = closeRW("RLock", tryW, func(rw *RW) waitingCall { return rw.RLock })
	closeLock  = closeRW("Lock", tryR, func(rw *RW) waitingCall { return rw.Lock })
)

// closeRW is the read-write lock's waiting call name, call of the lock,
// held back by the one lease that try takes (a writer, a reader).
func closeRW(name string, try func(ctx context.Context, t *testing.T, rw *RW) *redlock.Lease, call func(rw *RW) waitingCall) closeWait {
	return closeWait{name,
		func(ctx context.Context, t *testing.T, c *redlock.Client, key string) []*redlock.Lease {
			l := try(ctx, t, rwm(t, c, key))
			require.NotNil(t, l)
			return []*redlock.Lease{l}
		},
		func(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) waitingCall {
			return call(rwm(t, c, key, o...))
		}}
}

// closeDuringWait runs, for each waiting call cw, Close of the call's
// Client while it waits (BetweenAttempts) and while its attempt is in
// flight and granted on the nodes (ReplyAfterClose).
func closeDuringWait(t *testing.T, k Kind, calls ...closeWait) {
	for _, cw := range calls {
		t.Run(cw.name+"/BetweenAttempts", func(t *testing.T) { closeBetweenAttempts(t, k, cw) })
		t.Run(cw.name+"/ReplyAfterClose", func(t *testing.T) { closeReplyAfterClose(t, k, cw) })
	}
}

// closeBetweenAttempts: another holder holds; the waiting call's first
// attempt is refused and it waits an hour for the next. Close interrupts it:
// it returns ErrNotAcquired and ErrClosed (not a context error), no goroutine
// started since it began is left, and once the other holder releases no key
// is left on any node but the restart quarantine's marker (no reader, no
// permit, no intent marker).
func closeBetweenAttempts(t *testing.T, k Kind, cw closeWait) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, k.Nodes))
	key := redistest.Key(t)
	held := cw.hold(ctx, t, k.client(t, clients, rwLong()...), key)
	c := k.client(t, clients, rwLong()...)
	first := newFirstRetry(time.Hour)
	call := cw.wait(t, c, key, first.option())
	before := goleak.IgnoreCurrent()

	got := lockAsync(ctx, call)
	waitRefused(ctx, t, first.refused, got)
	closeBounded(ctx, t, c)
	closedCall(ctx, t, got)
	goleak.VerifyNone(t, append([]goleak.Option{before}, k.ClientGoroutines...)...)

	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Empty(c, keysLeft(clients)) }, 5*time.Second, time.Millisecond,
		"nothing left on the nodes once the holder released")
}

// closeReplyAfterClose: the waiting call's attempt after the other holder
// released runs on every node and is granted there, but its replies are held
// back (replyGate) until Close has interrupted the call. The call returns
// ErrNotAcquired and ErrClosed, no goroutine started since it began is
// left, and when Close returns the grant is undone on every node: no key is
// left but the restart quarantine's marker.
func closeReplyAfterClose(t *testing.T, k Kind, cw closeWait) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, k.Nodes)
	clients := redistest.Clients(t, nodes)
	key := redistest.Key(t)
	holder := k.client(t, clients, rwLong()...)
	held := cw.hold(ctx, t, holder, key)

	gated := redistest.Clients(t, nodes) // the waiting call's own connections
	gates := make([]*replyGate, len(gated))
	for i, g := range gated {
		gates[i] = &replyGate{}
		addHook(g, gates[i])
	}
	// A node timeout that a loaded machine does not reach before Close: the
	// gate must be opened by Close, not by the round's deadline.
	c := k.client(t, gated, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(10*time.Second))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	step := NewStepper(sctx)
	call := cw.wait(t, c, key, step.Option())
	before := goleak.IgnoreCurrent()

	got := lockAsync(ctx, call)
	waitRefused(ctx, t, step.Failed, got)
	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
	landed(t, func() bool { return onlyIntent(clients, key) }, "the holder's release landed everywhere")
	// The holder's Client goes too: its batches' goroutines, started by the
	// release after the snapshot, linger for the next batch until Close.
	require.NoError(t, holder.Close())
	for _, g := range gates {
		g.arm()
	}
	step.Next <- struct{}{}
	for i, g := range gates {
		select {
		case <-g.passed:
		case <-ctx.Done():
			t.Fatalf("node %d never ran the attempt", i)
		}
	}
	require.NotEmpty(t, keysLeft(clients), "the attempt was granted on the nodes")
	closeBounded(ctx, t, c)
	closedCall(ctx, t, got)
	for i, g := range gates {
		assert.ErrorIs(t, g.released(), redlock.ErrClosed, "node %d: the reply was held until Close", i)
	}
	goleak.VerifyNone(t, append([]goleak.Option{before}, k.ClientGoroutines...)...)
	assert.Empty(t, keysLeft(clients), "Close returned with the grant undone on every node")
}

// onlyIntent reports whether no key is left on any node but the restart
// quarantine's marker and the intent marker of a waiting Lock on key.
func onlyIntent(clients []redis.UniversalClient, key string) bool {
	for _, k := range keysLeft(clients) {
		if !strings.HasPrefix(k, IntentKey(key)+" on node ") {
			return false
		}
	}
	return true
}

// closeBounded closes c, failing the test if Close has not returned when
// ctx ends (a waiting call it did not interrupt holds it up).
func closeBounded(ctx context.Context, t *testing.T, c *redlock.Client) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not return: the waiting call holds it up")
	}
}

// closedCall asserts that the waiting call whose outcome arrives on got was
// interrupted by Close.
func closedCall(ctx context.Context, t *testing.T, got <-chan result) {
	t.Helper()
	select {
	case res := <-got:
		err := res.err
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		assert.ErrorIs(t, err, redlock.ErrClosed)
		assert.NotErrorIs(t, err, context.Canceled, "the caller's context was not cancelled")
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
	case <-ctx.Done():
		t.Fatal("the waiting call did not end on Close")
	}
}

// keysLeft returns the keys on any node but the restart quarantine's
// marker, which a vouched node keeps.
func keysLeft(clients []redis.UniversalClient) []string {
	var left []string
	for i, c := range clients {
		keys, err := c.Keys(context.Background(), "*").Result()
		if err != nil {
			return []string{err.Error()}
		}
		for _, k := range keys {
			if k != MarkerKey {
				left = append(left, fmt.Sprintf("%s on node %d", k, i))
			}
		}
	}
	slices.Sort(left)
	return left
}

// replyGate is a go-redis hook that, once armed, lets the next script call
// run on the node and then holds its reply back until the call's context
// ends: a reply still on its way when Close interrupts the call.
type replyGate struct {
	mu     sync.Mutex
	armed  bool
	passed chan struct{} // closed once the held call has run on the node
	cause  error         // why the held call's context ended
}

func (g *replyGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.passed = true, make(chan struct{})
}

// released returns the cause of the held call's context, once it ended.
func (g *replyGate) released() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cause
}

func (g *replyGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *replyGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return g.hold(ctx, []redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

// The engine sends an attempt alone or in a pipeline with the readings of
// the restart quarantine's proof: either is held.
func (g *replyGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return g.hold(ctx, cmds, func() error { return next(ctx, cmds) })
	}
}

// hold runs send and, when armed and cmds hold a script, holds the reply
// until ctx ends.
func (g *replyGate) hold(ctx context.Context, cmds []redis.Cmder, send func() error) error {
	g.mu.Lock()
	hold := g.armed && slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" })
	g.armed = g.armed && !hold
	passed := g.passed
	g.mu.Unlock()
	if !hold {
		return send()
	}
	err := send()
	close(passed)
	<-ctx.Done()
	g.mu.Lock()
	g.cause = context.Cause(ctx)
	g.mu.Unlock()
	return err
}
