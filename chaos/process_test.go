package chaos_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/internal/backendtest"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

// procCtx returns a context that ends after d or with the test.
func procCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// procNodes starts n nodes on a fresh process backend closed with the test.
func procNodes(t *testing.T, n int, spec chaos.NodeSpec) []chaos.Node {
	t.Helper()
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	nodes, err := b.StartNodes(procCtx(t, 30*time.Second), n, spec)
	require.NoError(t, err)
	require.Len(t, nodes, n)
	return nodes
}

// isTimeout reports whether err is a deadline or I/O timeout, as opposed to
// a refused or reset connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// pingWithin pings through c with a deadline of d.
func pingWithin(t *testing.T, c *redis.Client, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

// The process backend passes the backends' conformance suite.
func TestProcessBackend(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "process", chaos.NewProcessBackend().Name())
	backendtest.Run(t, func(t *testing.T) chaos.Backend {
		b := chaos.NewProcessBackend()
		t.Cleanup(func() { assert.NoError(t, b.Close()) })
		return b
	}, backendtest.Errs{NotRunning: redisnode.ErrNotRunning, NoClock: chaos.ErrNoClock, Closed: chaos.ErrBackendClosed})
}

// A killed process node refuses connections at once rather than hanging
// them.
func TestProcessKilledNodeRefuses(t *testing.T) {
	t.Parallel()
	node := procNodes(t, 1, chaos.NodeSpec{})[0]
	require.NoError(t, node.Kill(procCtx(t, 20*time.Second)))
	err := pingWithin(t, redistest.Client(t, node.Addr()), time.Second)
	require.Error(t, err, "a killed node must not answer")
	assert.False(t, isTimeout(err), "a killed node refuses, it does not hang: %v", err)
}

func TestProcessBackendInvalidInput(t *testing.T) {
	t.Parallel()
	b := chaos.NewProcessBackend()
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	ctx := procCtx(t, 10*time.Second)
	//nolint:staticcheck // a nil context is the bad input under test
	_, err := b.StartNodes(nil, 1, chaos.NodeSpec{})
	assert.Error(t, err)

	bad := chaos.NewProcessBackend(chaos.WithRedisServer("/nonexistent/redis-server"), nil)
	_, err = bad.StartNodes(ctx, 1, chaos.NodeSpec{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis-server not found")
	assert.NoError(t, bad.Close())
}
