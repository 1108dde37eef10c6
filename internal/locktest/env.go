package locktest

import (
	"testing"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redlock"
)

// Env returns the Env of Run for kind k: k.Nodes nodes, and mutexes and
// Clients made by k.defaultClient with a setup's options.
func (k Kind) Env() Env {
	newClient := func(t *testing.T, clients []redis.UniversalClient, s Setup) *redlock.Client {
		t.Helper()
		return k.defaultClient(t, clients, setupOptions(s)...)
	}
	return Env{
		Nodes: k.Nodes,
		NewMutex: func(t *testing.T, clients []redis.UniversalClient, key string, s Setup) Mutex {
			c := newClient(t, clients, s)
			if s.Clock != nil {
				k.SetClock(c, s.Clock)
			}
			return mutex(t, c, key)
		},
		NewClient: func(t *testing.T, clients []redis.UniversalClient, s Setup) Client {
			c := newClient(t, clients, s)
			return Client{
				NewMutex:  func(t *testing.T, key string) Mutex { return mutex(t, c, key) },
				WakeState: func(key string) (int, int) { return k.WakeState(c, key) },
				Close:     func() { _ = c.Close() },
			}
		},
	}
}

// setupOptions returns the options that give a Client the setup s.
func setupOptions(s Setup) []redlock.Option {
	o := []redlock.Option{redlock.WithTTL(s.TTL)}
	if s.NodeTimeout > 0 {
		o = append(o, redlock.WithNodeTimeout(s.NodeTimeout))
	}
	switch {
	case s.NoRetry:
		o = append(o, redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }))
	case s.Retry != nil:
		o = append(o, redlock.WithRetry(s.Retry))
	}
	if s.NoWakeup {
		o = append(o, redlock.WithWakeup(false))
	}
	return o
}
