package redlock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

func newSingleClient(t *testing.T, client redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := single.New(client, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mutex returns c's mutex for key.
func singleMutex(t *testing.T, c *redlock.Client, key string) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	return m
}

// kind is single, for the shared tests of internal/locktest that take a
// locktest.Kind.
var singleKind = locktest.Kind{
	Nodes: 1,
	New: func(clients []redis.UniversalClient, opts ...redlock.Option) (*redlock.Client, error) {
		return single.New(clients[0], opts...)
	},
	ACLUnused:         []string{"+pttl"}, // only fenced Redlock's second phase sends PTTL
	WithoutClockFloor: redlock.WithoutClockFloor,
	WakeState:         redlock.WakeState,
	SetClock:          redlock.SetClock,
}

func TestSingleConformance(t *testing.T) { locktest.Run(t, singleKind.Env()) }

// TestConformanceMultiKey runs the suite on multi-key mutexes (NewMultiMutex
// over key and key+":2"), but for the wake-up tests: a multi-key Lock polls.
func TestSingleConformanceMultiKey(t *testing.T) { locktest.Run(t, singleKind.MultiEnv()) }

// TestMultiKey runs the multi-key lock's tests over one node.
func TestSingleMultiKey(t *testing.T) { locktest.RunMultiKey(t, singleKind) }

// TestSemaphore runs the counting semaphore's tests on one node
// (docs/shapes.md, Semaphore).
func TestSingleSemaphore(t *testing.T) { locktest.RunSemaphore(t, singleKind) }

// TestRWMutex runs the read-write lock's tests on one node (docs/shapes.md,
// Read-write lock).
func TestSingleRWMutex(t *testing.T) { locktest.RunRWMutex(t, singleKind) }
