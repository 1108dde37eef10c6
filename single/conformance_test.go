package single_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/single"
)

func newClient(t *testing.T, client redis.UniversalClient, opts ...single.Option) *single.Client {
	t.Helper()
	c, err := single.New(client, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mutex returns c's mutex for key.
func mutex(t *testing.T, c *single.Client, key string) *single.Mutex {
	t.Helper()
	m, err := c.NewMutex(key)
	require.NoError(t, err)
	return m
}

// kind is single, for the shared tests of internal/locktest that take a
// locktest.Kind.
var kind = locktest.Kind{
	Nodes: 1,
	New: func(clients []redis.UniversalClient, opts ...single.Option) (*single.Client, error) {
		return single.New(clients[0], opts...)
	},
	ACLUnused:         []string{"+pttl"}, // only fenced Redlock's second phase sends PTTL
	WithoutClockFloor: single.WithoutClockFloor,
	WakeState:         single.WakeState,
	SetClock:          single.SetClock,
}

func TestConformance(t *testing.T) { locktest.Run(t, kind.Env()) }

// TestConformanceMultiKey runs the suite on multi-key mutexes (NewMultiMutex
// over key and key+":2"), but for the wake-up tests: a multi-key Lock polls.
func TestConformanceMultiKey(t *testing.T) { locktest.Run(t, kind.MultiEnv()) }

// TestMultiKey runs the multi-key lock's tests over one node.
func TestMultiKey(t *testing.T) { locktest.RunMultiKey(t, kind) }

// TestSemaphore runs the counting semaphore's tests on one node
// (docs/shapes.md, Semaphore).
func TestSemaphore(t *testing.T) { locktest.RunSemaphore(t, kind) }

// TestRWMutex runs the read-write lock's tests on one node (docs/shapes.md,
// Read-write lock).
func TestRWMutex(t *testing.T) { locktest.RunRWMutex(t, kind) }
