package coord_test

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/coord"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// backend is a Locker over real redis-server nodes.
type backend struct {
	name    string
	locker  coord.Locker
	nodes   []*redisnode.Node
	clients []redis.UniversalClient
}

// nodeTimeout is the lock clients' per-node timeout: below half the shortest
// TTL the tests use (100ms), and long enough for a loaded machine running
// -race, where the default of TTL/10 (10ms for such a TTL) is not.
const nodeTimeout = 40 * time.Millisecond

// fastRetry makes Lock poll every 5ms, so that handovers in tests are quick.
func fastRetry() backoff.BackOff { return backoff.NewConstantBackOff(5 * time.Millisecond) }

func newSingle(t *testing.T, opts ...redlock.Option) backend {
	t.Helper()
	nodes := redistest.Nodes(t, 1)
	clients := redistest.Clients(t, nodes)
	c, err := single.New(clients[0], append([]redlock.Option{redlock.WithRetry(fastRetry), redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := coord.New(c)
	require.NoError(t, err)
	return backend{"single", l, nodes, clients}
}

func newRedlock(t *testing.T, n int, opts ...redlock.Option) backend {
	t.Helper()
	nodes := redistest.Nodes(t, n)
	clients := redistest.Clients(t, nodes)
	c, err := redlock.New(clients, append([]redlock.Option{redlock.WithQuarantine(0), redlock.WithRetry(fastRetry), redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := coord.New(c)
	require.NoError(t, err)
	return backend{"redlock", l, nodes, clients}
}

// backends runs f on a single node and on a 3-node redlock.
func backends(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("single", func(t *testing.T) { f(t, newSingle(t)) })
	t.Run("redlock", func(t *testing.T) { f(t, newRedlock(t, 3)) })
}

// loadedBackends is backends with a per-node timeout for many concurrent
// clients on a small machine running -race (the lock's default for an 8s
// TTL is 100ms; connections are also dialled during the first requests).
func loadedBackends(t *testing.T, f func(t *testing.T, b backend)) {
	const timeout = 500 * time.Millisecond
	t.Run("single", func(t *testing.T) { f(t, newSingle(t, redlock.WithNodeTimeout(timeout))) })
	t.Run("redlock", func(t *testing.T) { f(t, newRedlock(t, 3, redlock.WithNodeTimeout(timeout))) })
}

// contextOf returns l's context (a Claim's or a Leadership's), cancelled
// when the test ends.
func contextOf(t *testing.T, ctx context.Context, l interface {
	Context(context.Context) (context.Context, context.CancelFunc)
}) context.Context {
	lctx, cancel := l.Context(ctx)
	t.Cleanup(cancel)
	return lctx
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pause stops nodes (SIGSTOP) until resumed or the test ends.
func pause(t *testing.T, nodes ...*redisnode.Node) {
	t.Helper()
	for _, n := range nodes {
		require.NoError(t, n.Pause())
		t.Cleanup(func() { _ = n.Resume() })
	}
}

func resume(t *testing.T, nodes ...*redisnode.Node) {
	t.Helper()
	for _, n := range nodes {
		require.NoError(t, n.Resume())
	}
}

// within waits for ch to close or deliver, failing the test after d.
func within[T any](t *testing.T, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
	}
	var zero T
	return zero
}
