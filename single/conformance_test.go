package single_test

import (
	"testing"

	"github.com/cenkalti/backoff/v4"
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
}

func TestConformance(t *testing.T) {
	locktest.Run(t, locktest.Env{
		Nodes: 1,
		NewMutex: func(t *testing.T, clients []redis.UniversalClient, key string, s locktest.Setup) locktest.Mutex {
			c := newClient(t, clients[0], setupOptions(s)...)
			if s.Clock != nil {
				single.SetClock(c, s.Clock)
			}
			m, err := c.NewMutex(key)
			require.NoError(t, err)
			return m
		},
		NewClient: func(t *testing.T, clients []redis.UniversalClient, s locktest.Setup) locktest.Client {
			c := newClient(t, clients[0], setupOptions(s)...)
			return locktest.Client{
				NewMutex: func(t *testing.T, key string) locktest.Mutex {
					m, err := c.NewMutex(key)
					require.NoError(t, err)
					return m
				},
				WakeState: func(key string) (int, int) { return single.WakeState(c, key) },
				Close:     func() { _ = c.Close() },
			}
		},
	})
}

func setupOptions(s locktest.Setup) []single.Option {
	opts := []single.Option{single.WithTTL(s.TTL)}
	if s.NodeTimeout > 0 {
		opts = append(opts, single.WithNodeTimeout(s.NodeTimeout))
	}
	switch {
	case s.NoRetry:
		opts = append(opts, single.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	case s.Retry != nil:
		opts = append(opts, single.WithRetry(s.Retry))
	}
	if s.NoWakeup {
		opts = append(opts, single.WithWakeup(false))
	}
	return opts
}
