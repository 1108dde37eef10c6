package locktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// Close racing the Client's use (graceful shutdown): nothing panics or
// races; calls in flight end, a waiting Lock is interrupted, and every call
// after Close fails with ErrClosed.
func closeWhileInUse(t *testing.T, env Env) {
	for _, noWakeup := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWakeup=%v", noWakeup), func(t *testing.T) {
			ctx, clients, key := fresh(t, env)
			c := env.NewClient(t, clients, Setup{TTL: longTTL, NoWakeup: noWakeup, Retry: poll})
			held, err := c.NewMutex(t, key).TryLock(ctx)
			require.NoError(t, err)

			// A Lock waiting for the held key, which only Close can end.
			waiting := make(chan error, 1)
			var started sync.WaitGroup
			started.Add(1)
			go func() {
				m := c.NewMutex(t, key)
				started.Done()
				_, err := m.Lock(ctx)
				waiting <- err
			}()
			started.Wait()
			if !noWakeup && !env.Polls {
				require.Eventually(t, func() bool { w, _ := c.WakeState(key); return w == 1 },
					5*time.Second, time.Millisecond, "the Lock waits in the queue")
			}

			// A Do whose fn runs until its context ends.
			doer := c.NewMutex(t, key+"-do")
			inFn := make(chan struct{})
			done := make(chan error, 1)
			var cause error
			go func() {
				done <- doer.Do(ctx, func(fctx context.Context, _ *redlock.Lease) error {
					close(inFn)
					<-fctx.Done()
					cause = context.Cause(fctx)
					return fctx.Err()
				})
			}()
			select {
			case <-inFn:
			case <-ctx.Done():
				t.Fatal("Do never ran fn")
			}

			// Workers that take and release their own keys until Close.
			const workers = 4
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			ms := make([]Mutex, workers)
			for w := range ms {
				ms[w] = c.NewMutex(t, fmt.Sprintf("%s-w%d", key, w))
			}
			var once sync.Once
			going := make(chan struct{})
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(m Mutex) {
					defer wg.Done()
					for i := 0; ; i++ {
						l, err := m.TryLock(ctx)
						if err == nil {
							if i == 1 {
								once.Do(func() { close(going) })
							}
							err = l.Release(ctx)
						}
						if err != nil {
							once.Do(func() { close(going) })
							errs <- err
							return
						}
					}
				}(ms[w])
			}
			select {
			case <-going: // the workers are busy
			case <-ctx.Done():
				t.Fatal("the workers never got going")
			}
			c.Close()
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.ErrorIs(t, err, redlock.ErrClosed, "a worker ended with another error")
			}
			select {
			case err := <-waiting:
				assert.ErrorIs(t, err, redlock.ErrNotAcquired)
				assert.ErrorIs(t, err, redlock.ErrClosed, "the waiting Lock was interrupted by Close")
				assert.NotErrorIs(t, err, context.Canceled, "the caller's context was not cancelled")
			case <-ctx.Done():
				t.Fatal("the waiting Lock did not end on Close")
			}

			select {
			case err := <-done:
				assert.ErrorIs(t, err, redlock.ErrClosed, "Do's error")
				assert.ErrorIs(t, cause, redlock.ErrClosed, "fn's context was cancelled by Close")
			case <-ctx.Done():
				t.Fatal("Close did not end fn's context")
			}

			// After Close: every call fails with ErrClosed, and leaves the
			// lease as it was.
			m := ms[0]
			_, err = m.TryLock(ctx)
			assert.ErrorIs(t, err, redlock.ErrNotAcquired, "TryLock after Close")
			assert.ErrorIs(t, err, redlock.ErrClosed, "TryLock after Close")
			_, err = m.Lock(ctx)
			assert.ErrorIs(t, err, redlock.ErrClosed, "Lock after Close")
			ran := false
			err = m.Do(ctx, func(context.Context, *redlock.Lease) error { ran = true; return nil })
			assert.ErrorIs(t, err, redlock.ErrClosed, "Do after Close")
			assert.False(t, ran)
			assert.ErrorIs(t, held.Extend(ctx), redlock.ErrClosed, "Extend after Close")
			assert.ErrorIs(t, held.KeepAlive(ctx), redlock.ErrClosed, "KeepAlive after Close")
			assert.ErrorIs(t, held.Release(ctx), redlock.ErrClosed, "Release after Close")
			assert.NoError(t, held.Err(), "the lease is untouched: still valid until ValidUntil")
			assert.GreaterOrEqual(t, count(holders(t, clients, key), held.Value()), majority(env.Nodes), "the key stays until its TTL")
			c.Close() // again: a no-op
		})
	}
}

// Close waits for what the Client still has in flight: the requests of an
// acquire that returned before a hung node answered, and a Release waiting
// for a hung node.
func closeWaits(t *testing.T, env Env) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, env.Nodes)
	clients := redistest.Clients(t, nodes)
	key := redistest.Key(t)
	s := Setup{TTL: 5 * time.Second, NodeTimeout: 500 * time.Millisecond}
	hung := len(nodes) - 1
	p := &probe{}
	addHook(clients[hung], p) // before the lock clients
	resumed := true
	t.Cleanup(func() {
		if !resumed {
			_ = nodes[hung].Resume()
		}
	})
	pause := func() {
		require.NoError(t, nodes[hung].Pause())
		resumed = false
	}

	if env.Nodes >= 3 {
		c := env.NewClient(t, clients, s)
		pause()
		l, err := c.NewMutex(t, key+"-straggler").TryLock(ctx)
		require.NoError(t, err, "a majority is healthy")
		// The acquire's request to the hung node went out (it ends at its
		// node timeout, as the node never answers).
		require.Eventually(t, func() bool { return len(p.carrying(l.Value())) == 1 }, 5*time.Second, time.Millisecond,
			"the acquire's request to the hung node went out")
		c.Close()
		assert.Equal(t, 0, p.inFlight(), "Close returned before the acquire's request to the hung node ended")
		assert.ErrorIs(t, l.Release(ctx), redlock.ErrClosed)
		require.NoError(t, nodes[hung].Resume())
		resumed = true
	}

	c := env.NewClient(t, clients, s)
	l, err := c.NewMutex(t, key).TryLock(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(holders(t, clients, key), l.Value()) == env.Nodes },
		5*time.Second, 5*time.Millisecond, "every node holds the value")
	pause()
	reached := p.watch(l.Value())
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	select {
	case <-reached: // the Release is in flight, waiting for the hung node
	case <-ctx.Done():
		t.Fatal("the release never reached the hung node")
	}
	c.Close()
	assert.Equal(t, 0, p.inFlight(), "Close returned before the release's request to the hung node ended")
	select {
	case err := <-released:
		if env.Nodes >= 3 {
			assert.NoError(t, err, "the healthy majority deleted the key")
		} else {
			var qe *redlock.QuorumError
			assert.ErrorAs(t, err, &qe, "the only node did not answer")
		}
	case <-ctx.Done():
		t.Fatal("the Release never returned")
	}
}

// VouchAndCheckNodesNilContextAndClosed asserts that Vouch and CheckNodes
// answer a nil context with a *ConfigError, and a closed Client with
// ErrClosed, for every node (the locks' methods are covered by Run:
// NilArguments, CloseWhileInUse).
func VouchAndCheckNodesNilContextAndClosed(t *testing.T, k Kind) {
	ctx := context.Background()
	c := k.defaultClient(t, redistest.Clients(t, redistest.Nodes(t, k.Nodes)))
	var nilCtx context.Context
	var ce *redlock.ConfigError
	require.ErrorAs(t, c.Vouch(nilCtx), &ce)
	assert.Equal(t, "context", ce.Field)
	checks := c.CheckNodes(nilCtx)
	require.Len(t, checks, k.Nodes)
	for _, ch := range checks {
		assert.ErrorAs(t, ch.Err, &ce)
	}

	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Vouch(ctx), redlock.ErrClosed)
	checks = c.CheckNodes(ctx)
	require.Len(t, checks, k.Nodes)
	for i, ch := range checks {
		assert.ErrorIs(t, ch.Err, redlock.ErrClosed)
		assert.Equal(t, i, ch.Index)
	}
}
