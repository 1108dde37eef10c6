package clockshim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/chaos/internal/clockshim"
	"github.com/redfence/redfence/internal/redisnode"
	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// shimmed builds the shim and starts one redis-server with it preloaded,
// reading its offset from the returned file, which starts at zero.
func shimmed(t *testing.T) (*redis.Client, string) {
	t.Helper()
	dir := t.TempDir()
	so, err := clockshim.Build(ctxTimeout(t, 30*time.Second), dir)
	require.NoError(t, err)
	offsetFile := filepath.Join(dir, "clock-offset")
	require.NoError(t, clockshim.WriteOffset(offsetFile, 0))
	nodes := redistest.Nodes(t, 1, func(o *redisnode.Options) {
		o.Env = []string{"LD_PRELOAD=" + so, clockshim.EnvFile + "=" + offsetFile}
	})
	return redistest.Client(t, nodes[0].Addr()), offsetFile
}

// serverSkew is the server's TIME minus this process's wall clock.
func serverSkew(t *testing.T, c *redis.Client) time.Duration {
	t.Helper()
	before := time.Now()
	got, err := c.Time(ctxTimeout(t, 5*time.Second)).Result()
	require.NoError(t, err)
	return got.Sub(before)
}

func TestShimServesAndShiftsTheClock(t *testing.T) {
	t.Parallel()
	c, offsetFile := shimmed(t)
	ctx := ctxTimeout(t, 10*time.Second)

	// The shim does not get in the way of normal service.
	require.NoError(t, c.Ping(ctx).Err())
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, "v", c.Get(ctx, "k").Val())
	assert.Equal(t, int64(3), c.IncrBy(ctx, "n", 3).Val())
	assert.InDelta(t, 0, serverSkew(t, c).Seconds(), 2, "offset 0 leaves the clock alone")

	// The offset is picked up by the running process, ahead and behind.
	require.NoError(t, clockshim.WriteOffset(offsetFile, 30*time.Second))
	assert.InDelta(t, 30, serverSkew(t, c).Seconds(), 2)
	require.NoError(t, clockshim.WriteOffset(offsetFile, -5*time.Second))
	assert.InDelta(t, -5, serverSkew(t, c).Seconds(), 2)
	require.NoError(t, clockshim.WriteOffset(offsetFile, 0))
	assert.InDelta(t, 0, serverSkew(t, c).Seconds(), 2)
}

func TestForwardJumpExpiresKey(t *testing.T) {
	t.Parallel()
	c, offsetFile := shimmed(t)
	ctx := ctxTimeout(t, 10*time.Second)

	require.NoError(t, c.Set(ctx, "lock", "a", 10*time.Second).Err())
	require.NoError(t, clockshim.WriteOffset(offsetFile, 0))
	assert.Equal(t, "a", c.Get(ctx, "lock").Val(), "offset 0: the key stays")
	ok, err := c.SetNX(ctx, "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "offset 0: SET NX must fail while the key lives")

	require.NoError(t, clockshim.WriteOffset(offsetFile, 30*time.Second))
	ok, err = c.SetNX(ctx, "lock", "b", 10*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok, "offset +30s: the PX 10000 key has expired, so SET NX succeeds")
	assert.Equal(t, "b", c.Get(ctx, "lock").Val())
}

func TestBackwardJumpThenResetExpiresKey(t *testing.T) {
	t.Parallel()
	c, offsetFile := shimmed(t)
	ctx := ctxTimeout(t, 10*time.Second)

	// Set while the node's clock is 30s behind: the key's absolute expiry
	// lies 20s in the real past, so it is gone once the clock is reset.
	require.NoError(t, clockshim.WriteOffset(offsetFile, -30*time.Second))
	require.NoError(t, c.Set(ctx, "k", "v", 10*time.Second).Err())
	assert.Equal(t, "v", c.Get(ctx, "k").Val())
	require.NoError(t, clockshim.WriteOffset(offsetFile, 0))
	assert.Equal(t, redis.Nil, c.Get(ctx, "k").Err())
}

func TestWriteOffsetInPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "offset")
	require.NoError(t, clockshim.WriteOffset(path, -123456789*time.Millisecond))
	before, err := os.Stat(path)
	require.NoError(t, err)

	// A shorter number must not leave the longer one's digits behind.
	require.NoError(t, clockshim.WriteOffset(path, 5*time.Millisecond+900*time.Microsecond))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"5"}, strings.Fields(string(b)), "truncated to whole milliseconds, no leftovers")
	after, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "rewritten in place, same inode")
	assert.Equal(t, before.Size(), after.Size(), "fixed width")

	require.Error(t, clockshim.WriteOffset(path, clockshim.MaxOffset+time.Millisecond))
	require.Error(t, clockshim.WriteOffset(path, -clockshim.MaxOffset-time.Millisecond))
	require.Error(t, clockshim.WriteOffset(filepath.Join(t.TempDir(), "no", "such", "dir"), 0))
}

func TestBuildErrors(t *testing.T) {
	t.Run("missing gcc", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := clockshim.Build(t.Context(), t.TempDir())
		require.ErrorIs(t, err, clockshim.ErrNoCompiler)
		assert.Contains(t, err.Error(), "apt-get install gcc")
	})
	t.Run("missing directory", func(t *testing.T) {
		_, err := clockshim.Build(t.Context(), filepath.Join(t.TempDir(), "missing"))
		require.Error(t, err)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := clockshim.Build(ctx, t.TempDir())
		var be *clockshim.BuildError
		require.ErrorAs(t, err, &be)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestSourceIsEmbedded(t *testing.T) {
	t.Parallel()
	assert.Contains(t, clockshim.Source, "gettimeofday")
	assert.Contains(t, clockshim.Source, clockshim.EnvFile)
}
