package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/locktest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redlock"
)

// One server under two addresses would vote twice: with the only other node
// held by another owner, a lock was granted. New refuses such clients,
// whatever the spelling of the address.
func TestNewRefusesSameServerTwice(t *testing.T) {
	nodes := redistest.Nodes(t, 2)
	port := nodes[0].Port()
	for _, alias := range []string{fmt.Sprintf("localhost:%d", port), fmt.Sprintf("[::ffff:127.0.0.1]:%d", port)} {
		t.Run(alias, func(t *testing.T) {
			clients := []redis.UniversalClient{
				redistest.Client(t, nodes[0].Addr()),
				redistest.Client(t, nodes[1].Addr()),
				redistest.Client(t, alias),
			}
			c, err := redlock.New(clients)
			if c != nil {
				_ = c.Close()
			}
			require.Error(t, err)
			assert.Nil(t, c)
			var ce *redlock.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "clients", ce.Field)
			assert.Contains(t, err.Error(), "clients 0 ("+nodes[0].Addr()+") and 2 ("+alias+") reach the same Redis server")
		})
	}
	// Distinct servers, and a node that does not answer (not checked): New
	// succeeds.
	dead := locktest.DeadAddrs(t, 1)[0]
	c, err := redlock.New([]redis.UniversalClient{
		redistest.Client(t, nodes[0].Addr()), redistest.Client(t, nodes[1].Addr()), redistest.Client(t, dead),
	})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// latency delays the scripts a client sends by d, as a server that takes d
// to answer them would (connection set-up is not delayed).
type latency time.Duration

func (d latency) delay(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if n := c.Name(); n == "evalsha" || n == "eval" {
			time.Sleep(time.Duration(d))
			return
		}
	}
}

func (latency) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d latency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		d.delay(cmd)
		return next(ctx, cmd)
	}
}
func (d latency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		d.delay(cmds...)
		return next(ctx, cmds)
	}
}

// The minimum TTL works on redlock: the default node timeout for 10ms is not
// 1ms (TTL/10), which a script taking 1ms never meets. A node timeout under
// 1ms is refused.
func TestMinimumTTLAcquires(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	for _, c := range clients {
		c.AddHook(latency(time.Millisecond))
	}
	c := newClient(t, clients)
	// Cache the scripts on the nodes first (the first EVALSHA on a new node
	// costs a second round trip, as EVAL).
	warm, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	lockOnce(ctx, t, warm)

	m, err := c.NewMutex(redistest.Key(t), redlock.WithTTL(10*time.Millisecond))
	require.NoError(t, err)
	// Lock retries (20ms back-off, growing): on a loaded machine an attempt
	// can still miss the 3.3ms node timeout, but not every attempt.
	for i := 0; i < 3; i++ {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := m.Lock(lctx)
		cancel()
		require.NoError(t, err, "a 10ms TTL, scripts taking 1ms")
		_ = l.Release(ctx)
	}

	for _, d := range []time.Duration{time.Nanosecond, 999 * time.Microsecond} {
		_, err := redlock.New(clients, redlock.WithNodeTimeout(d))
		var ce *redlock.ConfigError
		require.ErrorAs(t, err, &ce, "node timeout %v", d)
		assert.Equal(t, "node timeout", ce.Field)
		assert.Contains(t, err.Error(), "must be at least 1ms")
	}
}

// Names the library uses itself are refused as lock keys: the quarantine
// marker, a fence hash, the release notices' prefix. Accepted, they failed
// with WRONGTYPE on every attempt (or shadowed another lock's fence hash).
func TestNewMutexRefusesReservedKeys(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	c := newClient(t, clients, redlock.WithFencing())
	for _, tc := range []struct{ prefix, key, want string }{
		{"", "redfence:node", "the restart quarantine's marker key"},
		{"redfence:", "node", "the restart quarantine's marker key"},
		{"", "{x}:fence", `the fence hash of the lock key "x"`},
		{"lock:", "{x}:fence", `the fence hash of the lock key "lock:{x}"`},
		{"", "{user:1}job:fence", `the fence hash of the lock key "{user:1}job"`},
		{"", "redfence:released:x", "the prefix of redfence's release notices"},
	} {
		m, err := c.NewMutex(tc.key, redlock.WithKeyPrefix(tc.prefix))
		var ce *redlock.ConfigError
		require.ErrorAs(t, err, &ce, "%s%s", tc.prefix, tc.key)
		assert.Nil(t, m)
		assert.Equal(t, "key", ce.Field)
		assert.Contains(t, err.Error(), tc.want)
	}
	// Look-alikes that are no lock's fence hash stay usable.
	for _, key := range []string{"x:fence", "redfence:nodes", "redfence:demo:lock", "{x}:fence:x"} {
		m, err := c.NewMutex(key)
		require.NoError(t, err, key)
		lockOnce(ctx, t, m, key)
	}
}

// A failed acquire on hung nodes returns when its context ends, not one node
// timeout later: it does not wait for the deletes on nodes that never
// answered (they go out all the same). Before, a 50ms context returned after
// the 2s node timeout.
func TestFailedAcquireReturnsAtDeadline(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	clients := redistest.Clients(t, nodes)
	c := newClient(t, clients, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(2*time.Second),
		redlock.WithRetry(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
	m, err := c.NewMutex(redistest.Key(t))
	require.NoError(t, err)
	lockOnce(ctx, t, m) // warm the connections
	pause(t, nodes)
	for name, f := range map[string]func(context.Context) error{
		"TryLock": func(c2 context.Context) error { _, err := m.TryLock(c2); return err },
		"Lock":    func(c2 context.Context) error { _, err := m.Lock(c2); return err },
	} {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start := time.Now()
		err := f(short)
		took := time.Since(start)
		cancel()
		requireGaveUp(t, err, name)
		assert.Less(t, took, time.Second, "%s returned %v after a 50ms deadline with a 2s node timeout", name, took)
	}
}

// Brand-new nodes: one error that says they are in restart quarantine and
// what to do (Vouch, WithQuarantine), with each node's refusal short.
func TestNewNodesErrorSaysWhatToDo(t *testing.T) {
	ctx := ctxT(t)
	clients := redistest.Clients(t, redistest.Nodes(t, 3))
	c, err := redlock.New(clients)
	require.NoError(t, err)
	defer c.Close()
	m := mutex(t, c, redistest.Key(t))
	err = failedTryLock(ctx, t, m)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	msg := err.Error()
	assert.Contains(t, msg, "3 node(s) in restart quarantine for up to 1m0s more")
	assert.Contains(t, msg, "new")
	assert.Contains(t, msg, "Vouch")
	assert.Contains(t, msg, "WithQuarantine")
	assert.Equal(t, 3, strings.Count(msg, "redfence: node in restart quarantine ("), msg)
	assert.NotContains(t, msg, "may have lost lock keys (restarted or flushed)", "not repeated per node")

	require.NoError(t, c.Vouch(ctx))
	lockOnce(ctx, t, m, "vouched, as the error says")
}

// A go-redis client with its default retries (MaxRetries 3, DialerRetries 5)
// turns a refused connection or a read-only replica into "node timed out": it
// retries within redfence's deadline, so the node's own error never reaches
// redfence. The timeout then says so, and what to set; with those settings the
// node's own error shows.
func TestNodeErrorsThroughClientRetries(t *testing.T) {
	ctx := ctxT(t)
	nodes := redistest.Nodes(t, 3)
	require.NoError(t, redistest.Client(t, nodes[2].Addr()).Do(ctx, "REPLICAOF", "127.0.0.1", nodes[0].Port()).Err())
	addrs := []string{nodes[0].Addr(), locktest.DeadAddrs(t, 1)[0], nodes[2].Addr()}
	attempt := func(t *testing.T, opts func(*redis.Options)) *redlock.QuorumError {
		var clients []redis.UniversalClient
		for _, a := range addrs {
			o := &redis.Options{Addr: a, ContextTimeoutEnabled: true}
			opts(o)
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
		}
		c, err := redlock.New(clients, redlock.WithQuarantine(0))
		require.NoError(t, err)
		defer c.Close()
		var qe *redlock.QuorumError
		require.ErrorAs(t, failedTryLock(ctx, t, mutex(t, c, redistest.Key(t))), &qe)
		require.Len(t, qe.Nodes, 2)
		return qe
	}
	t.Run("default retries", func(t *testing.T) {
		qe := attempt(t, func(*redis.Options) {})
		for _, ne := range qe.Nodes {
			if strings.Contains(ne.Err.Error(), "timed out") {
				assert.Contains(t, ne.Err.Error(), "the client's retries (MaxRetries 3, DialerRetries 5) may have hidden the node's error: set MaxRetries -1, DialerRetries 1")
			}
		}
		assert.Contains(t, qe.Nodes[0].Err.Error(), "timed out", "the refused node, behind 5 dial attempts 100ms apart")
	})
	t.Run("no retries", func(t *testing.T) {
		qe := attempt(t, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
		assert.Equal(t, 1, qe.Nodes[0].Index)
		assert.Contains(t, qe.Nodes[0].Err.Error(), "connection refused")
		assert.Equal(t, 2, qe.Nodes[1].Index)
		assert.Contains(t, qe.Nodes[1].Err.Error(), "READONLY")
	})
}
