package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/core"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// aclPrefix is the key prefix redistest.LockACL is written for.
const aclPrefix = "lock:"

// aclOpts are the options of every lock client in the TLS/ACL tests: a
// node timeout that leaves room for TLS handshakes under -race. The restart
// quarantine is redlock's default (on, 60s).
func aclOpts(extra ...redlock.Option) []redlock.Option {
	return append([]redlock.Option{
		redlock.WithTTL(5 * time.Second),
		redlock.WithNodeTimeout(time.Second),
		redlock.WithKeyPrefix(aclPrefix),
		redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }),
	}, extra...)
}

// aclScenario is everything redlock does with its defaults plus fencing
// (Vouch, then a fenced, quarantined acquire, extend, release) and with
// everything off (plain SET NX acquire, extend, release). It returns the
// first failure.
func aclScenario(ctx context.Context, clients []redis.UniversalClient, key string) error {
	c, err := redlock.New(clients, aclOpts()...)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Vouch(ctx); err != nil {
		return fmt.Errorf("vouch: %w", err)
	}
	m, err := c.NewMutex(key, redlock.WithFencing())
	if err != nil {
		return err
	}
	if err := aclLockExtendRelease(ctx, m, true); err != nil {
		return fmt.Errorf("fenced, quarantined: %w", err)
	}
	plain, err := redlock.New(clients, aclOpts(redlock.WithQuarantine(0))...)
	if err != nil {
		return err
	}
	defer plain.Close()
	pm, err := plain.NewMutex(key + "-plain")
	if err != nil {
		return err
	}
	if err := aclLockExtendRelease(ctx, pm, false); err != nil {
		return fmt.Errorf("plain: %w", err)
	}
	return nil
}

func aclLockExtendRelease(ctx context.Context, m *redlock.Mutex, fenced bool) error {
	l, err := m.TryLock(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if fenced != (l.Token() > 0) {
		return fmt.Errorf("token %d with fencing %v", l.Token(), fenced)
	}
	if err := l.Extend(ctx); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// aclDenied reports whether err is an ACL refusal: NOPERM for a command
// sent by the client (or a key it declares), or, in Redis 7.0, ERR "The user
// executing the script can't run this command" (or "can't access at least
// one of the keys") for what a script calls.
func aclDenied(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOPERM") ||
		strings.Contains(err.Error(), "The user executing the script can't "))
}

// TestTLSACLRedlock runs redlock over three TLS nodes with a client
// certificate, as an ACL user limited to redistest.LockACL, with fencing and
// the restart quarantine on.
func TestTLSACLRedlock(t *testing.T) {
	keysOff := []string{"~other:*"}
	for _, f := range strings.Fields(redistest.LockACL) {
		if !strings.HasPrefix(f, "~") {
			keysOff = append(keysOff, f)
		}
	}
	env := redistest.TLS(t, 3,
		redistest.User{Name: "redfence", Rules: redistest.LockACL},
		redistest.User{Name: "nokeys", Rules: strings.Join(keysOff, " ")},
		redistest.User{Name: "redfence-check", Rules: redistest.CheckACL},
		redistest.User{Name: "redfence-wake", Rules: redistest.LockACL + " " + redistest.WakeupACL},
	)
	admins := make([]*redis.Client, len(env.Addrs))
	for i := range admins {
		admins[i] = env.Admin(t, i)
	}

	t.Run("FencedQuarantinedLock", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		// Not newClient, which vouches: the lock user vouches itself below.
		c, err := redlock.New(env.Clients(t, "redfence"), aclOpts(redlock.WithFencing())...)
		require.NoError(t, err)
		defer c.Close()
		key := redistest.Key(t)
		m, err := c.NewMutex(key)
		require.NoError(t, err)

		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrQuarantined, "brand-new nodes start quarantined: the quarantine is on")
		require.NoError(t, c.Vouch(ctx), "the lock user can vouch")

		var last fencing.Token
		for i := 0; i < 3; i++ {
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			assert.Greater(t, l.Token(), last)
			last = l.Token()
			require.NoError(t, l.Extend(ctx))
			require.NoError(t, l.Release(ctx))
		}
		acked := 0
		for i, a := range admins {
			got, err := a.HGet(ctx, core.FenceKey(aclPrefix+key), "t").Uint64()
			if errors.Is(err, redis.Nil) {
				continue // a straggler cut off once the majority had answered
			}
			require.NoError(t, err)
			assert.LessOrEqual(t, got, uint64(last), "node %d", i)
			if got == uint64(last) {
				acked++
			}
		}
		assert.GreaterOrEqual(t, acked, 2, "a majority acknowledged the last token")

		// Contention from a second set of TLS connections as the same user.
		other := newClient(t, env.Clients(t, "redfence"), aclOpts(redlock.WithFencing())...)
		om, err := other.NewMutex(key)
		require.NoError(t, err)
		held, err := m.TryLock(ctx)
		require.NoError(t, err)
		_, err = om.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrTaken)
		require.NoError(t, held.Release(ctx))

		// The plain path (SET NX, no script) as well.
		require.NoError(t, aclScenario(ctx, env.Clients(t, "redfence"), redistest.Key(t)))

		for i, a := range admins {
			clients, err := a.ClientList(ctx).Result()
			require.NoError(t, err)
			assert.Contains(t, clients, "user=redfence ", "node %d: the locks ran as the limited user", i)
		}
	})

	// A user with every command but none of the key patterns is refused on
	// every node: NOPERM, reported as each node's error.
	t.Run("WithoutKeyPatternsRefused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		clients := env.Clients(t, "nokeys")
		for _, opts := range [][]redlock.Option{aclOpts(redlock.WithQuarantine(0)), aclOpts(redlock.WithFencing())} {
			c := newClient(t, clients, opts...)
			m, err := c.NewMutex(redistest.Key(t))
			require.NoError(t, err)
			_, err = m.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			assert.False(t, errors.Is(err, redlock.ErrTaken))
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			require.Len(t, qe.Nodes, 3)
			for _, ne := range qe.Nodes {
				assert.Contains(t, ne.Error(), "NOPERM")
			}
			var ne redlock.NodeError
			require.ErrorAs(t, err, &ne)
		}
		err := newClient(t, clients, aclOpts()...).Vouch(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOPERM")
	})

	// Every part of the rule is needed: without any one of them some
	// operation fails with an ACL refusal.
	t.Run("EveryPartNeeded", func(t *testing.T) {
		parts := strings.Fields(redistest.LockACL)
		for i, part := range parts {
			t.Run(part, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				user := fmt.Sprintf("without%d", i)
				args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + env.Password}
				for j, p := range parts {
					if j != i {
						args = append(args, p)
					}
				}
				for _, a := range admins {
					require.NoError(t, a.Do(ctx, args...).Err())
					// An empty script cache, so that EVAL is needed as on a
					// fresh or restarted node.
					require.NoError(t, a.ScriptFlush(ctx).Err())
				}
				err := aclScenario(ctx, env.Clients(t, user), redistest.Key(t))
				require.Error(t, err, "redlock works without %s", part)
				assert.True(t, aclDenied(err), "%v", err)
				t.Logf("without %s: %v", part, err)
			})
		}
	})

	// Release notices need redistest.WakeupACL on top of the lock rule. With
	// the lock rule alone a release still succeeds (the script's PUBLISH is
	// refused quietly) and a waiting Lock of another client polls; with both,
	// the notice wakes it (an hour's back-off: nothing else could).
	t.Run("Wakeup", func(t *testing.T) {
		for _, tc := range []struct {
			user    string
			notices bool
		}{{"redfence", false}, {"redfence-wake", true}} {
			t.Run(tc.user, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				user := tc.user
				retry := func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }
				if tc.notices {
					retry = func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
				}
				a := newClient(t, env.Clients(t, user), aclOpts()...)
				b := newClient(t, env.Clients(t, user), aclOpts(redlock.WithRetry(retry))...)
				key := redistest.Key(t)
				ma, err := a.NewMutex(key)
				require.NoError(t, err)
				mb, err := b.NewMutex(key)
				require.NoError(t, err)
				held, err := ma.TryLock(ctx)
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() {
					l, err := mb.Lock(ctx)
					if err == nil {
						err = l.Release(ctx)
					}
					got <- err
				}()
				if tc.notices {
					require.Eventually(t, func() bool { _, s := redlock.WakeState(b, aclPrefix+key); return s == 3 }, 10*time.Second, time.Millisecond,
						"B subscribed as %s", user)
				}
				require.NoError(t, held.Release(ctx), "release as %s", user)
				require.NoError(t, <-got, "B got the lock as %s", user)
				if !tc.notices {
					_, s := redlock.WakeState(b, aclPrefix+key)
					assert.Equal(t, 0, s, "no subscription without the channel rule")
				}
			})
		}
	})

	// CheckNodes needs CONFIG GET, which the lock user does not have: every
	// node is reported as not checked, naming the command. An operator user
	// with redistest.CheckACL can check them.
	t.Run("CheckNodes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		checks := newClient(t, env.Clients(t, "redfence"), aclOpts()...).CheckNodes(ctx)
		require.Len(t, checks, 3)
		for _, ch := range checks {
			require.Error(t, ch.Err)
			assert.Contains(t, ch.Err.Error(), "CONFIG GET appendonly")
			assert.Contains(t, ch.Err.Error(), "NOPERM")
		}
		checks = newClient(t, env.Clients(t, "redfence-check"), aclOpts()...).CheckNodes(ctx)
		require.Len(t, checks, 3)
		for _, ch := range checks {
			require.NoError(t, ch.Err)
			assert.Equal(t, "master", ch.Role)
		}
	})
}
