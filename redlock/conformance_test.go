package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/redlock"
)

func newClient(t *testing.T, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// The nodes are brand new: vouch for them, as the docs tell users to (an
	// error here means some node is down or not Redis; tests that want that
	// check it themselves).
	_ = c.Vouch(context.Background())
	return c
}

// kind is redlock over the given number of nodes, for the shared tests of
// internal/locktest that take a locktest.Kind.
func kind(nodes int) locktest.Kind {
	return locktest.Kind{
		Nodes:             nodes,
		New:               redlock.New,
		DefaultQuarantine: redlock.DefaultQuarantine,
		WithoutClockFloor: redlock.WithoutClockFloor,
		WakeState:         redlock.WakeState,
		SetClock:          redlock.SetClock,
	}
}

func TestConformance(t *testing.T) { locktest.Run(t, kind(5).Env()) }

// TestConformanceMultiKey runs the suite on multi-key mutexes (NewMultiMutex
// over key and key+":2"), but for the wake-up tests: a multi-key Lock polls.
func TestConformanceMultiKey(t *testing.T) { locktest.Run(t, kind(5).MultiEnv()) }

// TestMultiKey runs the multi-key lock's tests over 5 nodes.
func TestMultiKey(t *testing.T) { locktest.RunMultiKey(t, kind(5)) }

// TestSemaphore runs the counting semaphore's tests on 5 nodes, with the
// counter-examples of a majority quorum (docs/shapes.md, Semaphore).
func TestSemaphore(t *testing.T) { locktest.RunSemaphore(t, kind(5)) }

// TestRWMutex runs the read-write lock's tests on 5 nodes, with every
// majority of readers against every majority of writers (docs/shapes.md,
// Read-write lock).
func TestRWMutex(t *testing.T) { locktest.RunRWMutex(t, kind(5)) }
