package redlock_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
	"github.com/redfence/redfence/single"
)

// userClient returns a client of node addr logged in as a new ACL user with
// rules (the ACL SETUSER form).
func userClient(t *testing.T, admin *redis.Client, addr, user, rules string) *redis.Client {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw-" + user}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	require.NoError(t, admin.Do(t.Context(), args...).Err())
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: "pw-" + user, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// An ACL user without EVAL/EVALSHA could take a plain lock (SET NX), then
// never extend or release it. New refuses it up front, naming the node and
// what to grant.
func TestSingleNewRefusesUserWithoutScripts(t *testing.T) {
	node := redistest.Nodes(t, 1)[0]
	admin := redistest.Client(t, node.Addr())
	for _, drop := range []string{" +eval", " +evalsha"} {
		t.Run(drop[1:], func(t *testing.T) {
			require.NoError(t, admin.ScriptFlush(t.Context()).Err(), "as on a new node")
			rules := strings.Replace(redistest.LockACL, drop+" ", " ", 1)
			require.NotEqual(t, redistest.LockACL, rules)
			c, err := single.New(userClient(t, admin, node.Addr(), "no"+drop[2:], rules), redlock.WithKeyPrefix("lock:"))
			if c != nil {
				_ = c.Close()
			}
			var ce *redlock.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "clients", ce.Field)
			assert.Contains(t, err.Error(), "node 0 ("+node.Addr()+") refuses scripts")
			assert.Contains(t, err.Error(), "NOPERM")
			assert.Contains(t, err.Error(), "+evalsha and +eval")
		})
	}
}

// CheckNodes tells a user that may not run scripts (here: the ACL changed
// after New) from one that may: the node's Err says so.
func TestSingleCheckNodesTestsScripts(t *testing.T) {
	ctx := t.Context()
	node := redistest.Nodes(t, 1)[0]
	admin := redistest.Client(t, node.Addr())
	rules := redistest.LockACL + " " + redistest.CheckACL
	c := newSingleClient(t, userClient(t, admin, node.Addr(), "checker", rules), redlock.WithKeyPrefix("lock:"))
	checks := c.CheckNodes(ctx)
	require.Len(t, checks, 1)
	require.NoError(t, checks[0].Err, "the lock rule with the checker rule")
	assert.NotEmpty(t, checks[0].RunID)

	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "checker", "-eval", "-evalsha").Err())
	checks = c.CheckNodes(ctx)
	require.Len(t, checks, 1)
	require.Error(t, checks[0].Err)
	assert.Contains(t, checks[0].Err.Error(), "script (EVALSHA, then EVAL): NOPERM")
	assert.False(t, (checks[0].Err == nil && len(checks[0].Risks) == 0))
}
