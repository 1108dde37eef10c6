package locktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Misuse and shutdown: releases with contexts that have ended, nil
// arguments, and Close racing the Client's use.
func runHardening(t *testing.T, env Env) {
	runTests(t, env, hardeningTests)
	if env.NewClient != nil {
		runTests(t, env, []test[Env]{
			{"CloseWhileInUse", closeWhileInUse},
			{"CloseWaitsForInFlightWork", func(t *testing.T, env Env) { needsProbe(t, env); closeWaits(t, env) }},
		})
	}
}

// hardeningTests are the tests of misuse that apply to every Env.
var hardeningTests = []test[Env]{
	{"ReleaseWithLeaseContext", releaseLeaseContext},
	{"ReleaseWithEndedContext", releaseEndedContext},
	{"ReleaseAfterHungMinority", func(t *testing.T, env Env) { needsProbe(t, env); releaseHungMinority(t, env) }},
	{"ExtendValidityExact", extendValidityExact},
	{"NilArguments", nilArguments},
}

// Releasing early from a lease's own context, or from the one Do hands fn:
// the release ends the lease, which cancels that context, and the deletes
// must go out all the same.
func releaseLeaseContext(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	l := take(ctx, t, m)
	lctx, cancel := l.Context(ctx)
	defer cancel()
	require.NoError(t, l.Release(lctx))
	landedEverywhere(t, clients, key, "", "released on every node")
	assert.ErrorIs(t, context.Cause(lctx), redlock.ErrReleased)

	var relErr error
	err := m.Do(ctx, func(fctx context.Context, l *redlock.Lease) error {
		relErr = l.Release(fctx)
		landedEverywhere(t, clients, key, "", "released on every node while fn still ran") // inspects Redis on its own context
		return nil
	})
	require.NoError(t, relErr, "Release with fn's context")
	assert.NoError(t, err, "Do does not report fn's own release as an error")
	b, err := m.TryLock(ctx)
	require.NoError(t, err, "the key is free")
	require.NoError(t, b.Release(ctx))
}

// A release with a context that was cancelled or whose deadline passed (an
// HTTP request's context once the client went away) still releases.
func releaseEndedContext(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})

	cancelled, cancel := context.WithCancel(ctx)
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	cancel()
	for name, rctx := range map[string]context.Context{"cancelled": cancelled, "expired": expired} {
		l, err := m.TryLock(ctx)
		require.NoError(t, err, name)
		require.Eventually(t, func() bool { return count(holders(t, clients, key), l.Value()) == env.Nodes },
			5*time.Second, 5*time.Millisecond, name)
		require.NoError(t, l.Release(rctx), name)
		landedEverywhere(t, clients, key, "", name+": released on every node")
		assert.ErrorIs(t, l.Err(), redlock.ErrReleased, name)
	}
}

// needsProbe skips a test that watches commands with a probe when the hooks of
// env's clients do not bracket each command's round trip.
func needsProbe(t *testing.T, env Env) {
}

// probe is a go-redis hook that records the commands a client sends (when
// each began, and its arguments) and counts those still running.
type probe struct {
	mu       sync.Mutex
	running  int
	sent     []probed
	watchFor string        // a value to watch for, with watched
	watched  chan struct{} // closed when a command carrying watchFor begins
}

type probed struct {
	at   time.Time
	args []any
}

func (p *probe) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *probe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.begin(cmd)
		defer p.end(1)
		return next(ctx, cmd)
	}
}

func (p *probe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			p.begin(c)
		}
		defer p.end(len(cmds))
		return next(ctx, cmds)
	}
}

func (p *probe) begin(cmd redis.Cmder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running++
	p.sent = append(p.sent, probed{at: time.Now(), args: cmd.Args()})
	if p.watched != nil && carries(cmd.Args(), p.watchFor) {
		close(p.watched)
		p.watched = nil
	}
}

func (p *probe) end(n int) {
	p.mu.Lock()
	p.running -= n
	p.mu.Unlock()
}

// inFlight returns how many commands have begun and not returned.
func (p *probe) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// carrying returns when each command carrying v began, in order.
func (p *probe) carrying(v string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var at []time.Time
	for _, s := range p.sent {
		if carries(s.args, v) {
			at = append(at, s.at)
		}
	}
	return at
}

// watch returns a channel closed when the next command carrying v begins.
func (p *probe) watch(v string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchFor, p.watched = v, make(chan struct{})
	return p.watched
}

func carries(args []any, v string) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && s == v {
			return true
		}
	}
	return false
}

// A minority node hangs: the acquire succeeds on the others and its request
// to the hung node is still out when Release is called, with a context that
// ends long before that request's node timeout. Release must wait for that
// request (or its timeout) before sending its own delete there, so that the
// acquire's late write cannot land after the delete, and must then still
// delete on the healthy nodes, its context notwithstanding.
func releaseHungMinority(t *testing.T, env Env) {
	if env.Nodes < 3 {
		t.Skip("needs a minority of nodes that can hang while the others grant the lock")
	}
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, env.Nodes)
	clients := redistest.Clients(t, nodes)
	key := redistest.Key(t)
	const nodeTimeout = 500 * time.Millisecond
	hung := len(nodes) - 1
	p := &probe{}
	addHook(clients[hung], p) // before the lock client
	m := env.NewMutex(t, clients, key, Setup{TTL: 5 * time.Second, NodeTimeout: nodeTimeout})
	require.NoError(t, nodes[hung].Pause())
	t.Cleanup(func() { _ = nodes[hung].Resume() })

	began := time.Now()
	l, err := m.TryLock(ctx)
	require.NoError(t, err, "a majority is healthy")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond) // ends while the acquire's request is still out
	defer cancel()
	require.NoError(t, l.Release(short), "the healthy majority deleted the key")
	for i, v := range holders(t, clients[:hung], key) {
		assert.Equal(t, "", v, "healthy node %d still holds a value", i)
	}
	sent := p.carrying(l.Value())
	require.Len(t, sent, 2, "the hung node was sent the acquire, then the release")
	// The acquire's request to the hung node cannot end before its node
	// timeout: the release may go out only then.
	assert.False(t, sent[1].Before(began.Add(nodeTimeout)),
		"the release reached the hung node %v after the acquire began, before the acquire's request there ended (node timeout %v)",
		sent[1].Sub(began), nodeTimeout)
}

// Extend moves ValidUntil to exactly the clock reading taken before its
// first request + TTL - drift allowance, as the acquire does.
func extendValidityExact(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	const ttl = 2 * time.Second
	var clock recorder
	m := env.NewMutex(t, clients, key, Setup{TTL: ttl, Clock: clock.now})
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		clock.take()
		require.NoError(t, l.Extend(ctx))
		r := clock.take()
		require.Len(t, r, 2, "one reading before sending, one at the decision")
		assert.Equal(t, r[0].Add(ttl-driftAllowance(ttl)), l.ValidUntil(), "ValidUntil = start of the extend + TTL - drift")
	}
	require.NoError(t, l.Release(ctx))
}

// Nil arguments get a clear error, never a nil dereference, and so do the
// methods of the nil lease that a failed TryLock returns.
func nilArguments(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	var nilCtx context.Context // a nil context, as a caller might pass by mistake
	var ce *redlock.ConfigError

	_, err := m.TryLock(nilCtx)
	require.ErrorAs(t, err, &ce, "TryLock(nil)")
	assert.Equal(t, "context", ce.Field)
	_, err = m.Lock(nilCtx)
	require.ErrorAs(t, err, &ce, "Lock(nil)")
	require.ErrorAs(t, m.Do(nilCtx, func(context.Context, *redlock.Lease) error { return nil }), &ce, "Do(nil, fn)")
	require.ErrorAs(t, m.Do(ctx, nil), &ce, "Do(ctx, nil)")
	assert.Equal(t, "fn", ce.Field)
	assert.Equal(t, env.Nodes, count(holders(t, clients, key), ""), "nothing was acquired")

	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.ErrorAs(t, l.Extend(nilCtx), &ce, "Extend(nil)")
	require.ErrorAs(t, l.KeepAlive(nilCtx), &ce, "KeepAlive(nil)")
	require.ErrorAs(t, l.Release(nilCtx), &ce, "Release(nil)")
	assert.NoError(t, l.Err(), "the lease is still held")
	lctx, cancel := l.Context(nilCtx)
	defer cancel()
	require.NoError(t, lctx.Err(), "Context(nil) takes nil as Background")

	// The nil lease of a failed TryLock.
	none, err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, none.Release(ctx), redlock.ErrNilLease)
	assert.ErrorIs(t, none.Extend(ctx), redlock.ErrNilLease)
	assert.ErrorIs(t, none.KeepAlive(ctx), redlock.ErrNilLease)
	assert.ErrorIs(t, none.Err(), redlock.ErrNilLease)
	select {
	case <-none.Done():
	default:
		t.Error("the nil lease's Done is not closed")
	}
	nctx, ncancel := none.Context(ctx)
	defer ncancel()
	assert.ErrorIs(t, context.Cause(nctx), redlock.ErrNilLease)
	assert.Equal(t, "", none.Key())
	assert.Equal(t, "", none.Value())
	assert.Equal(t, fencing.Token(0), none.Token())
	assert.True(t, none.ValidUntil().IsZero())

	require.NoError(t, lctx.Err())
	require.NoError(t, l.Release(ctx))
	assert.ErrorIs(t, context.Cause(lctx), redlock.ErrReleased)

	// A retry factory that returns a typed nil BackOff: Lock calls it once
	// its first attempt was refused.
	typedNil := env.NewMutex(t, clients, key, Setup{TTL: longTTL, Retry: func() backoff.BackOff {
		var b *backoff.ExponentialBackOff
		return b
	}})
	held, err := typedNil.TryLock(ctx)
	require.NoError(t, err)
	_, err = typedNil.Lock(ctx)
	require.ErrorAs(t, err, &ce, "a typed nil BackOff")
	assert.Equal(t, "retry", ce.Field)
	require.NoError(t, held.Release(ctx))
}
