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

func TestConformance(t *testing.T) {
	locktest.Run(t, locktest.Env[*single.Lease]{
		Nodes: 1,
		NewMutex: func(t *testing.T, clients []redis.UniversalClient, key string, s locktest.Setup) locktest.Mutex[*single.Lease] {
			opts := []single.Option{single.WithTTL(s.TTL)}
			if s.NodeTimeout > 0 {
				opts = append(opts, single.WithNodeTimeout(s.NodeTimeout))
			}
			if s.NoRetry {
				opts = append(opts, single.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
			}
			c := newClient(t, clients[0], opts...)
			if s.Clock != nil {
				single.SetClock(c, s.Clock)
			}
			m, err := c.NewMutex(key)
			require.NoError(t, err)
			return m
		},
	})
}
