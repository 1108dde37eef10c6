package redlock_test

import (
	"context"
	"testing"

	"github.com/cenkalti/backoff/v4"
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
	}
}

func TestConformance(t *testing.T) { conformance(t) }

func conformance(t *testing.T, extra ...redlock.Option) {
	locktest.Run(t, locktest.Env{
		Nodes: 5,
		NewMutex: func(t *testing.T, clients []redis.UniversalClient, key string, s locktest.Setup) locktest.Mutex {
			c := newClient(t, clients, setupOptions(s, extra)...)
			if s.Clock != nil {
				redlock.SetClock(c, s.Clock)
			}
			m, err := c.NewMutex(key)
			require.NoError(t, err)
			return m
		},
		NewClient: func(t *testing.T, clients []redis.UniversalClient, s locktest.Setup) locktest.Client {
			c := newClient(t, clients, setupOptions(s, extra)...)
			return locktest.Client{
				NewMutex: func(t *testing.T, key string) locktest.Mutex {
					m, err := c.NewMutex(key)
					require.NoError(t, err)
					return m
				},
				WakeState: func(key string) (int, int) { return redlock.WakeState(c, key) },
				Close:     func() { _ = c.Close() },
			}
		},
	})
}

func setupOptions(s locktest.Setup, extra []redlock.Option) []redlock.Option {
	opts := append([]redlock.Option{redlock.WithTTL(s.TTL)}, extra...)
	if s.NodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(s.NodeTimeout))
	}
	switch {
	case s.NoRetry:
		opts = append(opts, redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	case s.Retry != nil:
		opts = append(opts, redlock.WithRetry(s.Retry))
	}
	if s.NoWakeup {
		opts = append(opts, redlock.WithWakeup(false))
	}
	return opts
}
