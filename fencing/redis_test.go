package fencing_test

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

// monitor records, through Redis's MONITOR command, every command the server
// executes, in execution order, including those run by scripts.
type monitor struct {
	marker string
	seen   chan struct{} // closed when a line containing marker arrives
	done   chan struct{} // closed when the reader goroutine ends

	mu    sync.Mutex
	lines []string
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	_, err = fmt.Fprint(conn, "MONITOR\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	ok, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", ok)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))

	m := &monitor{marker: "monitor-marker-" + redistest.Key(t), seen: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		var once sync.Once
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, line)
			m.mu.Unlock()
			if strings.Contains(line, m.marker) {
				once.Do(func() { close(m.seen) })
			}
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close() // ends the reader
		<-m.done
	})
	return m
}

// flush sends a marker command through c and waits until the monitor has
// seen it, so every command that completed before flush was called is in
// the returned lines.
func (m *monitor) flush(t *testing.T, c redis.UniversalClient) []string {
	t.Helper()
	require.NoError(t, c.Echo(testCtx(t), m.marker).Err())
	select {
	case <-m.seen:
	case <-time.After(testTimeout):
		t.Fatal("MONITOR never showed the marker")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// setsOf returns the values SET at key, by scripts or clients, in execution
// order.
func setsOf(t *testing.T, lines []string, key string) []fencing.Token {
	t.Helper()
	re := regexp.MustCompile(`\] "(?i:set)" "` + regexp.QuoteMeta(key) + `" "(\d+)"`)
	var out []fencing.Token
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			n, err := strconv.ParseUint(m[1], 10, 64)
			require.NoError(t, err)
			out = append(out, fencing.Token(n))
		}
	}
	return out
}

func TestRedisGuardConcurrentWrite(t *testing.T) {
	t.Parallel()
	for _, order := range tokenOrders {
		t.Run(order.name, func(t *testing.T) {
			t.Parallel()
			node := redistest.Nodes(t, 1)[0]
			client := redistest.Client(t, node.Addr())
			g := fencing.NewRedisGuard(client)
			dataKey := g.DataKey("account", "balance")
			mon := startMonitor(t, node.Addr())
			lists := tokenLists(t, writeTokens, writers, order.ascending)
			ctx := testCtx(t)

			outcomes := runWriters(lists, func(tok fencing.Token) error {
				return g.Write(ctx, "account", tok, dataKey, tok.String(), 0)
			})
			// MONITOR lists the SETs of the data, in the order Redis
			// executed them.
			applied := setsOf(t, mon.flush(t, client), dataKey)
			checkOutcomes(t, outcomes, applied, writeTokens)
			assert.Equal(t, "400", client.Get(ctx, dataKey).Val(), "the data comes from the highest token")
			assert.Equal(t, "400", client.Get(ctx, g.DataKey("account", "fence")).Val(), "the fence is the highest token")
		})
	}
}

func TestRedisGuardKleppmann(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	g := fencing.NewRedisGuard(client)
	ctx := testCtx(t)

	t.Run("guarded", func(t *testing.T) {
		key := g.DataKey("file", "guarded")
		// Client A acquired the lock with token 33, then paused before
		// writing; its lease expired. Client B acquired token 34 and wrote.
		require.NoError(t, g.Write(ctx, "file", 34, key, "B", 0))
		// A wakes up and writes with its old token: rejected.
		err := g.Write(ctx, "file", 33, key, "A", 0)
		requireStale(t, err, "file", 33, 34)
		assert.Equal(t, "B", client.Get(ctx, key).Val(), "B's write survives")
	})
	t.Run("control: plain SET loses B's update", func(t *testing.T) {
		key := g.DataKey("file", "plain")
		require.NoError(t, client.Set(ctx, key, "B", 0).Err())
		require.NoError(t, client.Set(ctx, key, "A", 0).Err()) // A's late write
		assert.Equal(t, "A", client.Get(ctx, key).Val(), "without fencing, A overwrote B")
	})
	t.Run("control: Check then a separate SET is not enough", func(t *testing.T) {
		key := g.DataKey("file2", "data")
		// A checks its token 33 before pausing: accepted at that moment.
		require.NoError(t, g.Check(ctx, "file2", 33))
		// B writes with 34 through the guard.
		require.NoError(t, g.Write(ctx, "file2", 34, key, "B", 0))
		// A's write, made after its earlier Check, lands on top.
		require.NoError(t, client.Set(ctx, key, "A", 0).Err())
		assert.Equal(t, "A", client.Get(ctx, key).Val(), "a check separate from the write does not fence it")
	})
}

func TestRedisGuardKeys(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	ctx := testCtx(t)

	g := fencing.NewRedisGuard(client)
	assert.Equal(t, "redfence:fence:{orders/1}:data", g.DataKey("orders/1", "data"))
	require.NoError(t, g.Check(ctx, "orders/1", 7))
	assert.Equal(t, "7", client.Get(ctx, "redfence:fence:{orders/1}:fence").Val())
	assert.Equal(t, time.Duration(-1), client.TTL(ctx, "redfence:fence:{orders/1}:fence").Val(), "the fence never expires")

	custom := fencing.NewRedisGuard(client, fencing.WithRedisKeyPrefix("app:"), nil)
	assert.Equal(t, "app:{orders/1}:data", custom.DataKey("orders/1", "data"))
	require.NoError(t, custom.Check(ctx, "orders/1", 3), "a different prefix is a different fence")
	assert.Equal(t, "3", client.Get(ctx, "app:{orders/1}:fence").Val())
	assert.Equal(t, "7", client.Get(ctx, "redfence:fence:{orders/1}:fence").Val())
}

func TestRedisGuardWrite(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	g := fencing.NewRedisGuard(client)
	ctx := testCtx(t)
	key := g.DataKey("r", "data")

	require.NoError(t, g.Write(ctx, "r", 5, key, "five", 90*time.Second))
	assert.Equal(t, "five", client.Get(ctx, key).Val())
	ttl := client.PTTL(ctx, key).Val()
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 90*time.Second)

	requireStale(t, g.Write(ctx, "r", 4, key, "four", 0), "r", 4, 5)
	assert.Equal(t, "five", client.Get(ctx, key).Val(), "a stale write changes nothing")
	assert.Greater(t, client.PTTL(ctx, key).Val(), time.Duration(0), "a stale write keeps the TTL")

	require.NoError(t, g.Write(ctx, "r", 5, key, "five again", 0), "the same holder writes again")
	assert.Equal(t, "five again", client.Get(ctx, key).Val())
	assert.Equal(t, time.Duration(-1), client.TTL(ctx, key).Val(), "ttl 0 means no expiry")

	require.NoError(t, g.Write(ctx, "r", 6, key, "six", time.Microsecond), "sub-millisecond TTLs round up, not to 0")
}

func TestRedisGuardInvalidArguments(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	ctx := testCtx(t)
	good := fencing.NewRedisGuard(client)
	var typedNil *redis.Client
	var nilGuard *fencing.RedisGuard

	cases := []struct {
		name string
		err  error
	}{
		{"nil client Check", fencing.NewRedisGuard(nil).Check(ctx, "r", 1)},
		{"nil client Write", fencing.NewRedisGuard(nil).Write(ctx, "r", 1, "k", "v", 0)},
		{"typed nil client", fencing.NewRedisGuard(typedNil).Check(ctx, "r", 1)},
		{"nil guard Check", nilGuard.Check(ctx, "r", 1)},
		{"nil guard Write", nilGuard.Write(ctx, "r", 1, "k", "v", 0)},
		{"brace in prefix", fencing.NewRedisGuard(client, fencing.WithRedisKeyPrefix("x{y}")).Check(ctx, "r", 1)},
		{"empty resource", good.Write(ctx, "", 1, "k", "v", 0)},
		{"empty data key", good.Write(ctx, "r", 1, "", "v", 0)},
		{"data key is the fence key", good.Write(ctx, "r", 1, good.DataKey("r", "fence"), "v", 0)},
		{"negative ttl", good.Write(ctx, "r", 1, good.DataKey("r", "data"), "v", -time.Second)},
	}
	for _, c := range cases {
		assert.ErrorIs(t, c.err, fencing.ErrInvalidArgument, c.name)
	}
	assert.ErrorIs(t, good.Write(ctx, "r", 0, good.DataKey("r", "data"), "v", 0), fencing.ErrInvalidToken)
	assert.Contains(t, fencing.NewRedisGuard(nil).Check(ctx, "r", 1).Error(), "nil redis client")
	assert.Equal(t, int64(0), client.DBSize(ctx).Val(), "rejected calls wrote nothing")
}

func TestRedisGuardCorruptFence(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	g := fencing.NewRedisGuard(client)
	ctx := testCtx(t)
	for _, bad := range []string{"abc", "007", "-5", "", "18446744073709551616", "99999999999999999999999"} {
		require.NoError(t, client.Set(ctx, g.DataKey("r", "fence"), bad, 0).Err())
		err := g.Write(ctx, "r", 1, g.DataKey("r", "data"), "v", 0)
		require.Error(t, err, bad)
		assert.NotErrorIs(t, err, fencing.ErrStaleToken, bad)
		assert.Contains(t, err.Error(), "not a token", bad)
	}
	assert.Zero(t, client.Exists(ctx, g.DataKey("r", "data")).Val(), "nothing was written past a corrupt fence")
}

func TestRedisGuardServerDown(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1)[0]
	g := fencing.NewRedisGuard(redistest.Client(t, node.Addr()))
	require.NoError(t, node.Kill())
	err := g.Check(testCtx(t), "r", 1)
	require.Error(t, err)
	assert.NotErrorIs(t, err, fencing.ErrStaleToken)
	assert.Contains(t, err.Error(), `fencing: redis check for resource "r"`)
}

// TestRedisGuardCluster runs the guard against a one-node Redis Cluster,
// where a script may only touch keys of one slot: DataKey's hash tag puts the
// data in the fence's slot, and a key without it is refused.
func TestRedisGuardCluster(t *testing.T) {
	t.Parallel()
	node := redistest.Nodes(t, 1, func(o *redisnode.Options) {
		o.Args = append(o.Args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	})[0]
	admin := redistest.Client(t, node.Addr())
	ctx := testCtx(t)
	require.NoError(t, admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err())
	require.Eventually(t, func() bool {
		info, err := admin.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 30*time.Second, 20*time.Millisecond)

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.Addr()}, MaxRedirects: 1})
	t.Cleanup(func() { assert.NoError(t, cc.Close()) })
	g := fencing.NewRedisGuard(cc)

	key := g.DataKey("orders/7", "data")
	require.NoError(t, g.Write(ctx, "orders/7", 2, key, "two", 0))
	assert.Equal(t, "two", cc.Get(ctx, key).Val())
	requireStale(t, g.Write(ctx, "orders/7", 1, key, "one", 0), "orders/7", 1, 2)

	err := g.Write(ctx, "orders/7", 3, "orders/7:data-without-tag", "three", 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CROSSSLOT")
	assert.Zero(t, cc.Exists(ctx, "orders/7:data-without-tag").Val())
}
