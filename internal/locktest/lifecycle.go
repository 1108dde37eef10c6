package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// lifecycleTests are the tests of KeepAlive and Do.
var lifecycleTests = []test[Env]{
	{"KeepAliveForManyTTLs", keepAliveMany},
	{"KeepAliveLosesBeforeValidUntil", keepAliveLoses},
	{"ReleaseRacingKeepAlive", releaseRacingKeepAlive},
	{"DoHoldsAndReleases", doHolds},
	{"DoCancelsFnOnLoss", doCancelsOnLoss},
	{"DoNotAcquired", doNotAcquired},
	{"DoReleasesOnPanic", doPanics},
}

// pauseMajority stops (SIGSTOP) a majority of nodes until the test ends.
func pauseMajority(t *testing.T, nodes []*redisnode.Node) {
	for _, n := range nodes[:majority(len(nodes))] {
		require.NoError(t, n.Pause())
		t.Cleanup(func() { _ = n.Resume() })
	}
}

func keepAliveMany(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	const ttl = time.Second
	l, err := env.NewMutex(t, clients, key, Setup{TTL: ttl}).TryLock(ctx)
	require.NoError(t, err)
	kctx, stop := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- l.KeepAlive(kctx) }()
	first := l.ValidUntil()
	// Five TTLs: without renewal the lease would have ended four times over.
	select {
	case <-time.After(5 * ttl):
	case <-l.Done():
		t.Fatalf("lease ended while kept alive: %v", l.Err())
	}
	assert.NoError(t, l.Err())
	assert.True(t, l.ValidUntil().After(first.Add(3*ttl)), "ValidUntil moved with the renewals")
	assert.GreaterOrEqual(t, count(holders(t, clients, key), l.Value()), majority(env.Nodes), "the keys are still ours")
	stop()
	assert.ErrorIs(t, <-kept, context.Canceled)
	require.NoError(t, l.Release(ctx), "still valid after KeepAlive stopped")
}

func keepAliveLoses(t *testing.T, env Env) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, env.Nodes)
	clients := redistest.Clients(t, nodes)
	// The loss margin is max(TTL/5, 2 x node timeout) = 600ms: 2 x node
	// timeout alone would be 100ms.
	const ttl, nodeTimeout = 3 * time.Second, 50 * time.Millisecond
	l, err := env.NewMutex(t, clients, redistest.Key(t), Setup{TTL: ttl, NodeTimeout: nodeTimeout}).TryLock(ctx)
	require.NoError(t, err)
	lctx, cancel := l.Context(ctx)
	defer cancel()
	closedAt := make(chan time.Time, 1)
	go func() {
		<-l.Done()
		closedAt <- time.Now()
	}()
	pauseMajority(t, nodes)
	err = l.KeepAlive(ctx)
	require.ErrorIs(t, err, redlock.ErrLost)
	at := <-closedAt
	// Given up once less than the margin was left (after one more extend
	// attempt of at most the node timeout): well before the last 2 x node
	// timeout.
	assert.True(t, at.Before(l.ValidUntil().Add(-2*nodeTimeout)),
		"Done closed %v before ValidUntil (want more than %v: the margin is TTL/5 = %v)", l.ValidUntil().Sub(at), 2*nodeTimeout, ttl/5)
	assert.ErrorIs(t, l.Err(), redlock.ErrLost)
	<-lctx.Done()
	assert.ErrorIs(t, context.Cause(lctx), redlock.ErrLost, "the lease's context is cancelled with the cause")
	// The failed extends' error is wrapped, not just formatted.
	var qe *redlock.QuorumError
	if assert.ErrorAs(t, err, &qe, "KeepAlive's error") {
		assert.Equal(t, "extend", qe.Op)
	}
	assert.ErrorAs(t, l.Err(), &qe, "Err")
	assert.ErrorAs(t, context.Cause(lctx), &qe, "context.Cause")
}

func releaseRacingKeepAlive(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	l, err := env.NewMutex(t, clients, key, Setup{TTL: 300 * time.Millisecond, NodeTimeout: 100 * time.Millisecond}).TryLock(ctx)
	require.NoError(t, err)
	kept := make(chan error, 1)
	go func() { kept <- l.KeepAlive(ctx) }()
	require.NoError(t, l.Release(ctx))
	assert.ErrorIs(t, <-kept, redlock.ErrReleased)
	landedEverywhere(t, clients, key, "", "no renewal outlived the release")
}

func doHolds(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	errFn := errors.New("fn failed")
	var held int
	err := m.Do(ctx, func(ctx context.Context, l *redlock.Lease) error {
		held = count(holders(t, clients, key), l.Value()) // holders inspects Redis on its own context, independent of the lease's context under test (as at its other call sites)
		return errFn
	})
	require.ErrorIs(t, err, errFn, "fn's error comes back")
	assert.GreaterOrEqual(t, held, majority(env.Nodes), "fn ran while the lock was held")
	landedEverywhere(t, clients, key, "", "released when fn returned")
	require.NoError(t, m.Do(ctx, func(context.Context, *redlock.Lease) error { return nil }))
}

func doCancelsOnLoss(t *testing.T, env Env) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, env.Nodes)
	clients := redistest.Clients(t, nodes)
	m := env.NewMutex(t, clients, redistest.Key(t), Setup{TTL: 2 * time.Second, NodeTimeout: 50 * time.Millisecond})
	var validUntil, stoppedAt time.Time
	err := m.Do(ctx, func(fctx context.Context, l *redlock.Lease) error {
		validUntil = l.ValidUntil()
		pauseMajority(t, nodes)
		<-fctx.Done()
		stoppedAt = time.Now()
		assert.ErrorIs(t, context.Cause(fctx), redlock.ErrLost)
		validUntil = l.ValidUntil()
		return fctx.Err()
	})
	require.ErrorIs(t, err, redlock.ErrLost)
	assert.ErrorIs(t, err, context.Canceled, "fn's own error is kept too")
	var qe *redlock.QuorumError
	assert.ErrorAs(t, err, &qe, "the failed extends' error is wrapped")
	assert.True(t, stoppedAt.Before(validUntil), "fn was told %v before the validity ended (want > 0)", validUntil.Sub(stoppedAt))
}

func doNotAcquired(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	holder := take(ctx, t, env.NewMutex(t, clients, key, Setup{TTL: longTTL}))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	ran := false
	err := env.NewMutex(t, clients, key, Setup{TTL: longTTL}).Do(short, func(context.Context, *redlock.Lease) error {
		ran = true
		return nil
	})
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, ran)
	require.NoError(t, holder.Release(ctx))
}

func doPanics(t *testing.T, env Env) {
	ctx, clients, key := fresh(t, env)
	m := env.NewMutex(t, clients, key, Setup{TTL: longTTL})
	assert.PanicsWithValue(t, "boom", func() {
		_ = m.Do(ctx, func(context.Context, *redlock.Lease) error { panic("boom") })
	})
	landedEverywhere(t, clients, key, "", "released despite the panic")
}
