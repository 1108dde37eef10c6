package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// aclPrefix is the key prefix redistest.LockACL is written for.
const aclPrefix = "lock:"

// aclOpts are the options of every lock client in the TLS/ACL tests: a
// node timeout that leaves room for TLS handshakes under -race. The restart
// quarantine is the kind's default unless extra sets it.
func aclOpts(extra ...[]redlock.Option) []redlock.Option {
	return opts(append([][]redlock.Option{{
		redlock.WithTTL(5 * time.Second),
		redlock.WithNodeTimeout(time.Second),
		redlock.WithKeyPrefix(aclPrefix),
		redlock.WithRetry(func() backoff.BackOff { return &backoff.StopBackOff{} }),
	}}, extra...)...)
}

// withFencing is WithFencing as an option list.
var withFencing = []redlock.Option{redlock.WithFencing()}

// vouched returns a Client of kind k over clients with the restart
// quarantine on, aclOpts and extra, after Vouch for its nodes; the caller
// closes it.
func (k Kind) vouched(ctx context.Context, clients []redis.UniversalClient, extra ...redlock.Option) (*redlock.Client, error) {
	c, err := k.New(clients, aclOpts(k.quarantineOn(), extra)...)
	if err != nil {
		return nil, err
	}
	if err := c.Vouch(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("vouch: %w", err)
	}
	return c, nil
}

// aclScenario is everything the kind does with the restart quarantine on
// (Vouch, then a fenced, quarantined acquire, extend, release) and with
// everything off (plain SET NX acquire, extend, release). It returns the
// first failure.
func (k Kind) aclScenario(ctx context.Context, clients []redis.UniversalClient, key string) error {
	c, err := k.vouched(ctx, clients)
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := c.NewMutex(key, redlock.WithFencing())
	if err != nil {
		return err
	}
	if err := lockExtendRelease(ctx, m, true); err != nil {
		return fmt.Errorf("fenced, quarantined: %w", err)
	}
	plain, err := k.New(clients, aclOpts(k.quarantineOff())...)
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

// lockExtendRelease takes m, extends and releases it, and checks that the
// lease has a token exactly when fenced.
func lockExtendRelease(ctx context.Context, m *redlock.Mutex, fenced bool) error {
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

// setUser creates or replaces user on every node from the ACL SETUSER form
// of a rule.
func setUser(ctx context.Context, t *testing.T, admins []*redis.Client, user, password, rules string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	for _, a := range admins {
		require.NoError(t, a.Do(ctx, args...).Err())
	}
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

// aclLine returns user's rules as ACL LIST shows them.
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

// TLSACL runs the kind over k.Nodes TLS nodes with a client certificate, as
// an ACL user limited to redistest.LockACL, with fencing and the restart
// quarantine on: the rule suffices, and every part of it is needed.
func TLSACL(t *testing.T, k Kind) {
	env := redistest.TLS(t, k.Nodes,
		redistest.User{Name: "redfence", Rules: redistest.LockACL},
		redistest.User{Name: "nokeys", Rules: withoutKeys(redistest.LockACL)},
		redistest.User{Name: "redfence-check", Rules: redistest.CheckACL},
		redistest.User{Name: "redfence-wake", Rules: redistest.LockACL + " " + redistest.WakeupACL},
	)
	admins := make([]*redis.Client, len(env.Addrs))
	for i := range admins {
		admins[i] = env.Admin(t, i)
	}
	t.Run("FencedQuarantinedLock", func(t *testing.T) { k.aclFencedQuarantined(t, env, admins) })

	// The rule as an aclfile line (loaded at startup) and as ACL SETUSER
	// arguments give the same user, and the SETUSER one works too.
	t.Run("RuleInBothForms", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		setUser(ctx, t, admins, "redfence2", env.Password, redistest.LockACL)
		for i, a := range admins {
			// reset also sets sanitize-payload, which only concerns RESTORE
			// payloads (never sent by redfence).
			fromSetUser := strings.Replace(aclLine(t, a, "redfence2"), " sanitize-payload", "", 1)
			assert.Equal(t, aclLine(t, a, "redfence"), fromSetUser, "node %d", i)
		}
		require.NoError(t, k.aclScenario(ctx, env.Clients(t, "redfence2"), redistest.Key(t)))
	})

	// A user with every command but none of the key patterns is refused on
	// every node: NOPERM, reported as each node's error, not as contention.
	t.Run("WithoutKeyPatternsRefused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		clients := env.Clients(t, "nokeys")
		for _, o := range [][]redlock.Option{aclOpts(k.quarantineOff()), aclOpts(withFencing, k.quarantineOn())} {
			m := mutex(t, k.client(t, clients, o...), redistest.Key(t))
			_, err := m.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			assert.False(t, errors.Is(err, redlock.ErrTaken))
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			require.Len(t, qe.Nodes, k.Nodes)
			for _, ne := range qe.Nodes {
				assert.Contains(t, ne.Error(), "NOPERM")
			}
			var ne redlock.NodeError
			require.ErrorAs(t, err, &ne)
			assert.Contains(t, ne.Error(), "NOPERM")
		}
		err := k.client(t, clients, aclOpts(k.quarantineOn())...).Vouch(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOPERM")
	})

	// Every part of the rule is needed: without any one of them some
	// operation fails with an ACL refusal, except the parts the kind never
	// uses (k.ACLUnused), without which everything still works.
	t.Run("EveryPartNeeded", func(t *testing.T) {
		parts := strings.Fields(redistest.LockACL)
		for _, p := range k.ACLUnused {
			require.Contains(t, parts, p, "a part the kind does not use is a part of the rule")
		}
		for i, part := range parts {
			t.Run(part, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				rest := strings.Join(append(parts[:i:i], parts[i+1:]...), " ")
				user := fmt.Sprintf("without%d", i)
				setUser(ctx, t, admins, user, env.Password, rest)
				for _, a := range admins {
					// An empty script cache, so that EVAL is needed as on a
					// fresh or restarted node.
					require.NoError(t, a.ScriptFlush(ctx).Err())
				}
				err := k.aclScenario(ctx, env.Clients(t, user), redistest.Key(t))
				if slices.Contains(k.ACLUnused, part) {
					assert.NoError(t, err, "the kind never sends what %s allows", part)
					return
				}
				require.Error(t, err, "the lock works without %s", part)
				assert.True(t, aclDenied(err), "%v", err)
				t.Logf("without %s: %v", part, err)
			})
		}
	})

	// A semaphore needs SemaphoreACL beyond LockACL, and a read-write lock
	// RWMutexACL, every part of each (acl_shapes.go).
	t.Run("SemaphoreNeedsSemaphoreACL", func(t *testing.T) { k.aclShape(t, env, admins, semACL) })
	t.Run("RWMutexNeedsRWMutexACL", func(t *testing.T) { k.aclShape(t, env, admins, rwACL) })

	// The marker key redfence:node belongs to the restart quarantine: a
	// client with fencing but without the quarantine should not need it.
	t.Run("FencingWithoutQuarantineNeedsNoMarker", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		setUser(ctx, t, admins, "nomarker", env.Password, strings.Replace(redistest.LockACL, " ~redfence:node", "", 1))
		m := mutex(t, k.client(t, env.Clients(t, "nomarker"), aclOpts(withFencing, k.quarantineOff())...), redistest.Key(t))
		require.NoError(t, lockExtendRelease(ctx, m, true), "fenced lock without the quarantine, as a user without ~%s", MarkerKey)
	})

	t.Run("Wakeup", func(t *testing.T) { k.aclWakeup(t, env) })
	t.Run("CheckNodes", func(t *testing.T) { k.aclCheckNodes(t, env, admins) })
}

func (k Kind) aclFencedQuarantined(t *testing.T, env *redistest.TLSNodes, admins []*redis.Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	clients := env.Clients(t, "redfence")
	// Not k.client, which vouches: the lock user vouches itself below.
	c := k.unvouched(t, clients, aclOpts(k.quarantineOn(), withFencing)...)
	key := redistest.Key(t)
	m := mutex(t, c, key)

	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "brand-new nodes start quarantined: the quarantine is on")
	require.NoError(t, c.Vouch(ctx), "the lock user can vouch")

	last := Tokens(ctx, t, m, 3)
	acked := 0
	for i, a := range admins {
		got, err := a.HGet(ctx, FenceKey(aclPrefix+key), "t").Uint64()
		if errors.Is(err, redis.Nil) {
			continue // a straggler cut off once the majority had answered
		}
		require.NoError(t, err)
		assert.LessOrEqual(t, got, uint64(last), "node %d", i)
		if got == uint64(last) {
			acked++
		}
	}
	assert.GreaterOrEqual(t, acked, majority(k.Nodes), "a majority acknowledged the last token")

	// Contention from a second set of TLS connections as the same user.
	om := mutex(t, k.client(t, env.Clients(t, "redfence"), aclOpts(k.quarantineOn(), withFencing)...), key)
	held, err := m.TryLock(ctx)
	require.NoError(t, err)
	_, err = om.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrTaken)
	require.NoError(t, held.Release(ctx))

	// A key with its own hash tag: its fence hash (lock:{user:1}...:fence)
	// is covered by ~lock:*.
	tagged := mutex(t, c, "{user:1}:"+redistest.Key(t))
	require.NoError(t, lockExtendRelease(ctx, tagged, true))

	// The plain path (SET NX, no script) as well.
	require.NoError(t, k.aclScenario(ctx, clients, redistest.Key(t)))

	// Nothing beyond the rule: other keys, other commands.
	for i, client := range clients {
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
			assert.True(t, aclDenied(err), "node %d: %v", i, err)
		}
	}

	for i, a := range admins {
		list, err := a.ClientList(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, list, "user=redfence ", "node %d: the locks ran as the limited user", i)
	}
}

// Release notices need redistest.WakeupACL on top of the lock rule. With
// the lock rule alone a release still succeeds (the script's PUBLISH is
// refused quietly) and a waiting Lock of another client polls; with both,
// the notice wakes it (an hour's back-off: nothing else could).
func (k Kind) aclWakeup(t *testing.T, env *redistest.TLSNodes) {
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
			a := k.client(t, env.Clients(t, user), aclOpts()...)
			b := k.client(t, env.Clients(t, user), aclOpts([]redlock.Option{redlock.WithRetry(retry)})...)
			key := redistest.Key(t)
			ma, mb := mutex(t, a, key), mutex(t, b, key)
			held, err := ma.TryLock(ctx)
			require.NoError(t, err)
			admins := env.Clients(t, redistest.AdminUser)
			got := LockThenRelease(ctx, mb)
			if tc.notices {
				require.Eventually(t, func() bool { _, s := k.wakeState(b, admins, aclPrefix+key); return s == k.Nodes }, 10*time.Second, time.Millisecond,
					"B subscribed on every node as %s", user)
			}
			require.NoError(t, held.Release(ctx), "release as %s", user)
			require.NoError(t, <-got, "B got the lock as %s", user)
			if !tc.notices {
				_, s := k.wakeState(b, admins, aclPrefix+key)
				assert.Equal(t, 0, s, "no subscription without the channel rule")
			}
		})
	}
}

// CheckNodes needs CONFIG GET, which the lock user does not have: every
// node is reported as not checked, naming the command. An operator user
// with redistest.CheckACL can check them.
func (k Kind) aclCheckNodes(t *testing.T, env *redistest.TLSNodes, admins []*redis.Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	checks := k.client(t, env.Clients(t, "redfence"), aclOpts()...).CheckNodes(ctx)
	require.Len(t, checks, k.Nodes)
	for _, ch := range checks {
		require.Error(t, ch.Err)
		assert.Contains(t, ch.Err.Error(), "CONFIG GET appendonly")
		assert.Contains(t, ch.Err.Error(), "NOPERM")
		assert.False(t, (ch.Err == nil && len(ch.Risks) == 0))
	}

	// The nodes run appendonly no: a risk unless the restart quarantine
	// covers the lock keys a restart loses.
	check := env.Clients(t, "redfence-check")
	for _, tc := range []struct {
		quarantine []redlock.Option
		risk       bool
	}{{k.quarantineOff(), true}, {k.quarantineOn(), false}} {
		checks = k.client(t, check, aclOpts(tc.quarantine)...).CheckNodes(ctx)
		require.Len(t, checks, k.Nodes)
		for _, ch := range checks {
			require.NoError(t, ch.Err)
			assert.Equal(t, "master", ch.Role)
			assert.Equal(t, "no", ch.AppendOnly)
			if tc.risk {
				require.NotEmpty(t, ch.Risks)
				assert.Contains(t, ch.Risks[0], "appendonly is off")
			} else {
				assert.NotContains(t, strings.Join(ch.Risks, "; "), "appendonly is off", "the quarantine covers restarts")
			}
		}
	}

	// Why CONFIG GET belongs to an operator user: it cannot be narrowed
	// to the settings CheckNodes reads, and it reveals secrets.
	for i, a := range admins {
		err := a.Do(ctx, "ACL", "SETUSER", "narrow", "+config|get|appendonly").Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Allowing first-arg of a subcommand is not supported")
		require.NoError(t, a.ConfigSet(ctx, "masterauth", "replication-secret").Err())
		got, err := check[i].ConfigGet(ctx, "masterauth").Result()
		require.NoError(t, err)
		assert.Equal(t, "replication-secret", got["masterauth"], "node %d", i)
	}
}
