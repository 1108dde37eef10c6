package single_test

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
	"github.com/redfence/redfence/single"
)

// aclPrefix is the key prefix redistest.LockACL is written for.
const aclPrefix = "lock:"

// aclOpts are the options of every lock client in the TLS/ACL tests: a
// node timeout that leaves room for TLS handshakes under -race.
func aclOpts(extra ...single.Option) []single.Option {
	return append([]single.Option{
		single.WithTTL(5 * time.Second),
		single.WithNodeTimeout(time.Second),
		single.WithKeyPrefix(aclPrefix),
		single.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }),
	}, extra...)
}

// lockUserScenario is everything single does with the restart quarantine
// on (Vouch, then a fenced acquire, extend, release) and with everything off
// (plain SET NX acquire, extend, release). It returns the first failure.
func lockUserScenario(ctx context.Context, client redis.UniversalClient, key string) error {
	c, err := single.New(client, aclOpts(single.WithQuarantine(10*time.Second))...)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Vouch(ctx); err != nil {
		return fmt.Errorf("vouch: %w", err)
	}
	m, err := c.NewMutex(key, single.WithFencing())
	if err != nil {
		return err
	}
	if err := lockExtendRelease(ctx, m, true); err != nil {
		return fmt.Errorf("fenced, quarantined: %w", err)
	}
	plain, err := single.New(client, aclOpts()...)
	if err != nil {
		return err
	}
	defer plain.Close()
	pm, err := plain.NewMutex(key + "-plain")
	if err != nil {
		return err
	}
	if err := lockExtendRelease(ctx, pm, false); err != nil {
		return fmt.Errorf("plain: %w", err)
	}
	return nil
}

func lockExtendRelease(ctx context.Context, m *single.Mutex, fenced bool) error {
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

// setUser creates or replaces user from the ACL SETUSER form of a rule.
func setUser(ctx context.Context, t *testing.T, admin *redis.Client, user, password, rules string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	require.NoError(t, admin.Do(ctx, args...).Err())
}

// withoutKeys is rules with its key patterns replaced by one that matches no
// redfence key.
func withoutKeys(rules string) string {
	out := []string{"~other:*"}
	for _, f := range strings.Fields(rules) {
		if !strings.HasPrefix(f, "~") {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// aclDenied reports whether err is an ACL refusal: NOPERM for a command
// sent by the client (or a key it declares), or, in Redis 7.0, ERR "The user
// executing the script can't run this command" (or "can't access at least
// one of the keys") for what a script calls.
func aclDenied(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOPERM") ||
		strings.Contains(err.Error(), "The user executing the script can't "))
}

func aclLine(t *testing.T, admin *redis.Client, user string) string {
	t.Helper()
	lines, err := admin.Do(t.Context(), "ACL", "LIST").StringSlice()
	require.NoError(t, err)
	for _, l := range lines {
		if strings.HasPrefix(l, "user "+user+" ") {
			return strings.TrimPrefix(l, "user "+user+" ")
		}
	}
	t.Fatalf("no ACL user %s in %q", user, lines)
	return ""
}

// TestTLSACLSingle runs package single over TLS with a client certificate,
// as an ACL user limited to redistest.LockACL, with fencing and the restart
// quarantine on.
func TestTLSACLSingle(t *testing.T) {
	env := redistest.TLS(t, 1,
		redistest.User{Name: "redfence", Rules: redistest.LockACL},
		redistest.User{Name: "nokeys", Rules: withoutKeys(redistest.LockACL)},
		redistest.User{Name: "redfence-check", Rules: redistest.CheckACL},
		redistest.User{Name: "redfence-wake", Rules: redistest.LockACL + " " + redistest.WakeupACL},
	)
	admin := env.Admin(t, 0)

	t.Run("FencedQuarantinedLock", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		client := env.Client(t, 0, "redfence")
		c := newClient(t, client, aclOpts(single.WithQuarantine(10*time.Second), single.WithFencing())...)
		key := redistest.Key(t)
		m, err := c.NewMutex(key)
		require.NoError(t, err)

		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, single.ErrQuarantined, "a brand-new node starts quarantined: the quarantine is on")
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
		got, err := admin.HGet(ctx, core.FenceKey(aclPrefix+key), "t").Result()
		require.NoError(t, err)
		assert.Equal(t, last.String(), got)

		// Contention over a second TLS connection as the same user.
		other := newClient(t, env.Client(t, 0, "redfence"), aclOpts(single.WithQuarantine(10*time.Second), single.WithFencing())...)
		om, err := other.NewMutex(key)
		require.NoError(t, err)
		held, err := m.TryLock(ctx)
		require.NoError(t, err)
		_, err = om.TryLock(ctx)
		require.ErrorIs(t, err, single.ErrTaken)
		require.NoError(t, held.Release(ctx))

		// A key with its own hash tag: its fence hash (lock:{user:1}...:fence)
		// is covered by ~lock:*.
		tagged, err := c.NewMutex("{user:1}:" + redistest.Key(t))
		require.NoError(t, err)
		require.NoError(t, lockExtendRelease(ctx, tagged, true))

		// The plain path (SET NX, no script) as well.
		require.NoError(t, lockUserScenario(ctx, client, redistest.Key(t)))

		// Nothing beyond the rule: other keys, other commands.
		for _, err := range []error{
			client.Get(ctx, "other").Err(),
			client.Set(ctx, "other", "x", 0).Err(),
			client.FlushAll(ctx).Err(),
			client.ConfigSet(ctx, "appendonly", "no").Err(),
			client.ConfigGet(ctx, "requirepass").Err(),
			client.Keys(ctx, "*").Err(),
			client.Eval(ctx, "return redis.call('GET', 'other')", nil).Err(),
			client.Eval(ctx, "return redis.call('FLUSHALL')", nil).Err(),
		} {
			assert.True(t, aclDenied(err), "%v", err)
		}

		clients, err := admin.ClientList(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, clients, "user=redfence ", "the locks ran as the limited user")
	})

	// The rule as an aclfile line (loaded at startup) and as ACL SETUSER
	// arguments give the same user, and the SETUSER one works too.
	t.Run("RuleInBothForms", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		setUser(ctx, t, admin, "redfence2", env.Password, redistest.LockACL)
		// reset also sets sanitize-payload, which only concerns RESTORE
		// payloads (never sent by redfence).
		fromSetUser := strings.Replace(aclLine(t, admin, "redfence2"), " sanitize-payload", "", 1)
		assert.Equal(t, aclLine(t, admin, "redfence"), fromSetUser)
		require.NoError(t, lockUserScenario(ctx, env.Client(t, 0, "redfence2"), redistest.Key(t)))
	})

	// A user with every command but none of the key patterns is refused:
	// NOPERM, reported as the node's error, not as contention.
	t.Run("WithoutKeyPatternsRefused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		client := env.Client(t, 0, "nokeys")
		for _, opts := range [][]single.Option{aclOpts(), aclOpts(single.WithFencing(), single.WithQuarantine(10*time.Second))} {
			c := newClient(t, client, opts...)
			m, err := c.NewMutex(redistest.Key(t))
			require.NoError(t, err)
			_, err = m.TryLock(ctx)
			require.ErrorIs(t, err, single.ErrNotAcquired)
			assert.False(t, errors.Is(err, single.ErrTaken))
			var ne single.NodeError
			require.ErrorAs(t, err, &ne)
			assert.Contains(t, ne.Error(), "NOPERM")
		}
		err := newClient(t, client, aclOpts(single.WithQuarantine(10*time.Second))...).Vouch(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOPERM")
	})

	// Every part of the rule is needed: without any one of them some
	// operation fails with an ACL refusal. +pttl is the exception for single (only
	// redlock's fence phase reads the key's TTL).
	t.Run("EveryPartNeeded", func(t *testing.T) {
		parts := strings.Fields(redistest.LockACL)
		for i, part := range parts {
			t.Run(part, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				rest := strings.Join(append(parts[:i:i], parts[i+1:]...), " ")
				user := fmt.Sprintf("without%d", i)
				setUser(ctx, t, admin, user, env.Password, rest)
				// An empty script cache, so that EVAL is needed as on a
				// fresh or restarted node.
				require.NoError(t, admin.ScriptFlush(ctx).Err())
				err := lockUserScenario(ctx, env.Client(t, 0, user), redistest.Key(t))
				if part == "+pttl" {
					assert.NoError(t, err, "single never sends PTTL")
					return
				}
				require.Error(t, err, "single works without %s", part)
				assert.True(t, aclDenied(err), "%v", err)
				t.Logf("without %s: %v", part, err)
			})
		}
	})

	// The marker key redfence:node belongs to the restart quarantine: a
	// client with fencing but without the quarantine should not need it.
	t.Run("FencingWithoutQuarantineNeedsNoMarker", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		setUser(ctx, t, admin, "nomarker", env.Password, strings.Replace(redistest.LockACL, " ~redfence:node", "", 1))
		c := newClient(t, env.Client(t, 0, "nomarker"), aclOpts(single.WithFencing())...)
		m, err := c.NewMutex(redistest.Key(t))
		require.NoError(t, err)
		require.NoError(t, lockExtendRelease(ctx, m, true), "fenced lock without the quarantine, as a user without ~%s", core.MarkerKey)
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
				a := newClient(t, env.Client(t, 0, user), aclOpts()...)
				b := newClient(t, env.Client(t, 0, user), aclOpts(single.WithRetry(retry))...)
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
					require.Eventually(t, func() bool { _, s := single.WakeState(b, aclPrefix+key); return s == 1 }, 10*time.Second, time.Millisecond,
						"B subscribed as %s", user)
				}
				require.NoError(t, held.Release(ctx), "release as %s", user)
				require.NoError(t, <-got, "B got the lock as %s", user)
				if !tc.notices {
					_, s := single.WakeState(b, aclPrefix+key)
					assert.Equal(t, 0, s, "no subscription without the channel rule")
				}
			})
		}
	})

	// CheckNodes needs CONFIG GET, which the lock user does not have: it
	// reports the node as not checked, naming the command. An operator user
	// with redistest.CheckACL can check it.
	t.Run("CheckNodes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		checks := newClient(t, env.Client(t, 0, "redfence"), aclOpts()...).CheckNodes(ctx)
		require.Len(t, checks, 1)
		require.Error(t, checks[0].Err)
		assert.Contains(t, checks[0].Err.Error(), "CONFIG GET appendonly")
		assert.Contains(t, checks[0].Err.Error(), "NOPERM")
		assert.False(t, checks[0].Safe())

		check := env.Client(t, 0, "redfence-check")
		checks = newClient(t, check, aclOpts()...).CheckNodes(ctx)
		require.Len(t, checks, 1)
		require.NoError(t, checks[0].Err)
		assert.Equal(t, "master", checks[0].Role)
		assert.Equal(t, "no", checks[0].AppendOnly)
		assert.Contains(t, checks[0].Risks[0], "appendonly is off")

		// Why CONFIG GET belongs to an operator user: it cannot be narrowed
		// to the settings CheckNodes reads, and it reveals secrets.
		err := admin.Do(ctx, "ACL", "SETUSER", "narrow", "+config|get|appendonly").Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Allowing first-arg of a subcommand is not supported")
		require.NoError(t, admin.ConfigSet(ctx, "masterauth", "replication-secret").Err())
		got, err := check.ConfigGet(ctx, "masterauth").Result()
		require.NoError(t, err)
		assert.Equal(t, "replication-secret", got["masterauth"])
	})
}
