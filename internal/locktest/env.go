package locktest

import (
	"testing"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/redlock"
)

// Env returns the Env of Run for kind k: k.Nodes nodes, and mutexes and
// Clients made by k.defaultClient with a setup's options.
func (k Kind) Env() Env { return k.env(mutex) }

// MultiEnv is Env with multi-key mutexes (NewMultiMutex): the mutex for key
// locks key and key+":2", so the suite's checks on key see the multi-key
// lock's first key.
// A multi-key Lock polls: the wake-up tests are left out.
func (k Kind) MultiEnv() Env {
	env := k.env(multiMutex)
	env.Polls = true
	return env
}

// multiMutex returns c's multi-key mutex for key and key+":2".
func multiMutex(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMultiMutex([]string{key, key + ":2"}, o...)
	require.NoError(t, err)
	return m
}

// env is Env with mutex as the way to make a mutex for a key.
func (k Kind) env(mutex func(t *testing.T, c *redlock.Client, key string, o ...redlock.Option) *redlock.Mutex) Env {
	newClient := func(t *testing.T, clients []redis.UniversalClient, s Setup) *redlock.Client {
		t.Helper()
		return k.defaultClient(t, clients, setupOptions(s)...)
	}
	return Env{
		Nodes:           k.Nodes,
		SharedWakeState: k.WakeState == nil,
		NewMutex: func(t *testing.T, clients []redis.UniversalClient, key string, s Setup) Mutex {
			c := newClient(t, clients, s)
			if s.Clock != nil {
				if k.SetClock == nil {
					t.Skip("the package's clock hook is out of this module's reach: the validity arithmetic runs in redlock's tests, over go-redis")
				}
				k.SetClock(c, s.Clock)
			}
			return mutex(t, c, key)
		},
		NewClient: func(t *testing.T, clients []redis.UniversalClient, s Setup) Client {
			c := newClient(t, clients, s)
			return Client{
				NewMutex:  func(t *testing.T, key string) Mutex { return mutex(t, c, key) },
				WakeState: func(key string) (int, int) { return k.wakeState(c, clients, key) },
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
