package redisnode_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redisnode"
)

// start starts a node and closes it when the test ends.
func start(t *testing.T, opts redisnode.Options) *redisnode.Node {
	t.Helper()
	n, err := redisnode.Start(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	return n
}

// client returns a go-redis client with the given timeouts and no command
// or dial retries.
func client(t *testing.T, addr string, timeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartSetGet(t *testing.T) {
	t.Parallel()
	n := start(t, redisnode.Options{})
	assert.True(t, n.Running())
	host, port, err := net.SplitHostPort(n.Addr())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.Equal(t, strconv.Itoa(n.Port()), port)

	c := client(t, n.Addr(), 2*time.Second)
	ctx := ctxTimeout(t, 5*time.Second)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	got, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)

	// The debug command is enabled and persistence is off by default.
	require.NoError(t, c.Do(ctx, "DEBUG", "SLEEP", "0").Err())
	cfg, err := c.ConfigGet(ctx, "appendonly").Result()
	require.NoError(t, err)
	assert.Equal(t, "no", cfg["appendonly"])
	cfg, err = c.ConfigGet(ctx, "dir").Result()
	require.NoError(t, err)
	assert.Equal(t, n.Dir(), cfg["dir"])
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	n := start(t, redisnode.Options{})
	fast := client(t, n.Addr(), 200*time.Millisecond)
	require.NoError(t, fast.Ping(ctxTimeout(t, 2*time.Second)).Err())

	require.NoError(t, n.Pause())
	assert.True(t, n.Running(), "a paused process is still running")
	pingCtx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := fast.Ping(pingCtx).Err()
	cancel()
	require.Error(t, err, "PING must not be answered while paused")

	require.NoError(t, n.Resume())
	require.NoError(t, client(t, n.Addr(), 2*time.Second).Ping(ctxTimeout(t, 5*time.Second)).Err())
	require.NoError(t, fast.Ping(ctxTimeout(t, 2*time.Second)).Err())
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		durable  bool
		wantKept bool
	}{
		{name: "volatile comes back empty", durable: false, wantKept: false},
		{name: "appendfsync always keeps data", durable: true, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := start(t, redisnode.Options{AppendFsyncAlways: tc.durable})
			addr := n.Addr()
			ctx := ctxTimeout(t, 10*time.Second)
			require.NoError(t, client(t, addr, 2*time.Second).Set(ctx, "k", "v", 0).Err())

			require.NoError(t, n.Kill())
			assert.False(t, n.Running())
			require.Error(t, client(t, addr, 200*time.Millisecond).Ping(ctx).Err(), "killed node must not answer")

			require.NoError(t, n.Restart(ctx))
			assert.True(t, n.Running())
			assert.Equal(t, addr, n.Addr(), "address is stable across restarts")

			got, err := client(t, addr, 2*time.Second).Get(ctx, "k").Result()
			if tc.wantKept {
				require.NoError(t, err)
				assert.Equal(t, "v", got)
			} else {
				require.ErrorIs(t, err, redis.Nil)
			}
		})
	}
}

func TestRestartRunningAndPausedNode(t *testing.T) {
	t.Parallel()
	n := start(t, redisnode.Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	require.NoError(t, n.Restart(ctx), "restart of a running node")
	require.NoError(t, n.Pause())
	require.NoError(t, n.Restart(ctx), "restart of a paused node")
	require.NoError(t, client(t, n.Addr(), 2*time.Second).Ping(ctx).Err())
}

func TestKillIsIdempotent(t *testing.T) {
	t.Parallel()
	n := start(t, redisnode.Options{})
	require.NoError(t, n.Kill())
	require.NoError(t, n.Kill())
	assert.False(t, n.Running())
	assert.ErrorIs(t, n.Pause(), redisnode.ErrNotRunning)
	assert.ErrorIs(t, n.Resume(), redisnode.ErrNotRunning)
}

func TestCloseRemovesTempDir(t *testing.T) {
	t.Parallel()
	n, err := redisnode.Start(t.Context(), redisnode.Options{})
	require.NoError(t, err)
	dir := n.Dir()
	require.DirExists(t, dir)

	require.NoError(t, n.Close())
	assert.NoDirExists(t, dir)
	assert.False(t, n.Running())
	assert.NoError(t, n.Close(), "second Close")
	assert.NoError(t, n.Kill(), "Kill after Close")
	assert.ErrorIs(t, n.Restart(t.Context()), redisnode.ErrClosed)
	assert.ErrorIs(t, n.Pause(), redisnode.ErrNotRunning)
}

func TestCloseKeepsGivenDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n, err := redisnode.Start(t.Context(), redisnode.Options{Dir: dir, AppendFsyncAlways: true})
	require.NoError(t, err)
	assert.Equal(t, dir, n.Dir())
	require.NoError(t, n.Close())
	assert.DirExists(t, dir)
	assert.FileExists(t, filepath.Join(dir, "redis.log"))
}

func TestConcurrentCloseAndRestart(t *testing.T) {
	t.Parallel()
	n, err := redisnode.Start(t.Context(), redisnode.Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = n.Restart(t.Context())
			_ = n.Pause()
			_ = n.Resume()
			_ = n.Running()
		})
	}
	wg.Go(func() { _ = n.Kill() })
	wg.Wait()
	require.NoError(t, n.Close())
	assert.False(t, n.Running())
	assert.NoDirExists(t, n.Dir())
}

func TestStartN(t *testing.T) {
	t.Parallel()
	nodes, err := redisnode.StartN(t.Context(), 3, redisnode.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range nodes {
			assert.NoError(t, n.Close())
		}
	})
	require.Len(t, nodes, 3)
	addrs := map[string]bool{}
	dirs := map[string]bool{}
	for _, n := range nodes {
		addrs[n.Addr()] = true
		dirs[n.Dir()] = true
		require.NoError(t, client(t, n.Addr(), 2*time.Second).Ping(ctxTimeout(t, 5*time.Second)).Err())
	}
	assert.Len(t, addrs, 3, "distinct addresses")
	assert.Len(t, dirs, 3, "distinct directories")
}

func TestStartNRejectsSharedPortOrDir(t *testing.T) {
	t.Parallel()
	_, err := redisnode.StartN(t.Context(), 2, redisnode.Options{Port: 6390})
	require.Error(t, err)
	_, err = redisnode.StartN(t.Context(), 2, redisnode.Options{Dir: t.TempDir()})
	require.Error(t, err)
	_, err = redisnode.StartN(t.Context(), -1, redisnode.Options{})
	require.Error(t, err)
	nodes, err := redisnode.StartN(t.Context(), 0, redisnode.Options{})
	require.NoError(t, err)
	assert.Empty(t, nodes)
}

func TestStartNClosesStartedNodesOnFailure(t *testing.T) {
	t.Parallel()
	// Every node fails, so nothing may be left running or on disk; goleak
	// in TestMain checks that no reaper goroutine is left.
	_, err := redisnode.StartN(t.Context(), 3, redisnode.Options{Args: []string{"--no-such-directive", "x"}})
	require.Error(t, err)
}

func TestBogusBinary(t *testing.T) {
	t.Parallel()
	_, err := redisnode.Start(t.Context(), redisnode.Options{Binary: "/nonexistent/redis-server"})
	require.ErrorIs(t, err, redisnode.ErrNoBinary)
	assert.Contains(t, err.Error(), "redis-server not found: install it (Debian: apt-get install redis-server) or set REDFENCE_REDIS_SERVER to its path")
	assert.Contains(t, err.Error(), "/nonexistent/redis-server")
}

func TestBinaryFromEnv(t *testing.T) {
	t.Setenv(redisnode.EnvBinary, "/nonexistent/from-env/redis-server")
	_, err := redisnode.Start(t.Context(), redisnode.Options{})
	require.ErrorIs(t, err, redisnode.ErrNoBinary)
	assert.Contains(t, err.Error(), "REDFENCE_REDIS_SERVER")
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	_, err := redisnode.Start(t.Context(), redisnode.Options{Port: -1})
	require.Error(t, err)
	_, err = redisnode.Start(t.Context(), redisnode.Options{Port: 70000})
	require.Error(t, err)
	_, err = redisnode.Start(t.Context(), redisnode.Options{StartTimeout: -time.Second})
	require.Error(t, err)
	//nolint:staticcheck // a nil context is the bad input under test
	_, err = redisnode.Start(nil, redisnode.Options{})
	require.Error(t, err)
}

func TestEarlyExitReportsLogTail(t *testing.T) {
	t.Parallel()
	_, err := redisnode.Start(t.Context(), redisnode.Options{Args: []string{"--no-such-directive", "x"}})
	var se *redisnode.StartError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.LogTail, "no-such-directive")
	assert.Contains(t, err.Error(), "exited before answering PING")
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	_, err = redisnode.Start(t.Context(), redisnode.Options{Port: port})
	var se *redisnode.StartError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.LogTail, "Address already in use")
}

func TestPickedPortCollisionIsRetried(t *testing.T) {
	// Not parallel: it replaces the package's port picker.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	busy := l.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	calls := 0
	restore := redisnode.SetPortPicker(func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return busy, nil
		}
		return redisnode.FreePort()
	})
	t.Cleanup(restore)

	n := start(t, redisnode.Options{})
	assert.NotEqual(t, busy, n.Port())
	assert.Equal(t, 2, calls)
}

func TestStartHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := redisnode.Start(ctx, redisnode.Options{})
	require.ErrorIs(t, err, context.Canceled)
	var se *redisnode.StartError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "context ended")
}

func TestStartTimeout(t *testing.T) {
	t.Parallel()
	// A one-nanosecond bound expires before the first probe can succeed.
	_, err := redisnode.Start(t.Context(), redisnode.Options{StartTimeout: time.Nanosecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "did not answer PING")
}

func TestStartErrorMessage(t *testing.T) {
	t.Parallel()
	err := &redisnode.StartError{Addr: "127.0.0.1:1", PID: 42, Reason: "exited before answering PING", Err: errors.New("exit status 1"), LogTail: "boom\n"}
	assert.Equal(t, "redisnode: redis-server on 127.0.0.1:1 (pid 42) exited before answering PING: exit status 1\n--- redis-server output (tail) ---\nboom", err.Error())
}

func TestEnvReachesTheProcess(t *testing.T) {
	t.Parallel()
	// The dynamic loader reports an LD_PRELOAD object it cannot load on
	// stderr and carries on, which proves the variable reached the process,
	// on the first start and again on Restart.
	missing := filepath.Join(t.TempDir(), "redfence-no-such-lib.so")
	n := start(t, redisnode.Options{Env: []string{"LD_PRELOAD=" + missing}})
	stderr := func() string {
		b, err := os.ReadFile(filepath.Join(n.Dir(), redisnode.StderrFileName))
		require.NoError(t, err)
		return string(b)
	}
	assert.Contains(t, stderr(), missing)
	require.NoError(t, n.Restart(ctxTimeout(t, 10*time.Second)))
	assert.Contains(t, stderr(), missing, "Restart keeps the environment")
	require.NoError(t, client(t, n.Addr(), 2*time.Second).Ping(ctxTimeout(t, 5*time.Second)).Err())
}

func TestInvalidEnv(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{{"NOEQUALS"}, {"=value"}, {"A=1", ""}} {
		_, err := redisnode.Start(t.Context(), redisnode.Options{Env: env})
		require.Error(t, err, "Env %q", env)
		assert.Contains(t, err.Error(), "invalid Env entry")
	}
}

// TestConfigFile: the config file is redis-server's first argument (its
// settings apply, and the command-line defaults still win), a relative path
// is taken from the current directory, and Sentinel mode runs with one.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis.conf"), []byte("maxmemory-policy allkeys-lru\nappendonly yes\n"), 0o600))
	t.Chdir(dir)
	n := start(t, redisnode.Options{ConfigFile: "redis.conf"})
	c := client(t, n.Addr(), time.Second)
	got, err := c.ConfigGet(t.Context(), "maxmemory-policy").Result()
	require.NoError(t, err)
	assert.Equal(t, "allkeys-lru", got["maxmemory-policy"], "the file's setting applies")
	got, err = c.ConfigGet(t.Context(), "appendonly").Result()
	require.NoError(t, err)
	assert.Equal(t, "no", got["appendonly"], "the command-line default wins over the file")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "sentinel.conf"), []byte("sentinel monitor m 127.0.0.1 1 1\n"), 0o600))
	s := start(t, redisnode.Options{ConfigFile: "sentinel.conf", Args: []string{"--sentinel"}})
	info, err := client(t, s.Addr(), time.Second).Info(t.Context(), "server").Result()
	require.NoError(t, err)
	assert.Contains(t, info, "redis_mode:sentinel")
	conf, err := os.ReadFile(filepath.Join(dir, "sentinel.conf"))
	require.NoError(t, err)
	assert.Contains(t, string(conf), "sentinel myid", "Sentinel rewrote its config file")
}
