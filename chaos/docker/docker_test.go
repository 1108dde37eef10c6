package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/redfence/redfence/chaos"
	"github.com/redfence/redfence/chaos/docker"
	"github.com/redfence/redfence/chaos/internal/backendtest"
)

// opTimeout bounds each control operation in the tests.
const opTimeout = time.Minute

// newBackend starts a backend on the real Docker engine, failing (never
// skipping) the test when none answers. Close is checked at cleanup.
func newBackend(t *testing.T, opts ...docker.Option) *docker.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, err := docker.NewBackend(ctx, opts...)
	if errors.Is(err, docker.ErrNoDocker) {
		t.Fatalf("these tests need a Docker engine and none answers: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

func startNodes(t *testing.T, b *docker.Backend, n int, spec chaos.NodeSpec) []chaos.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	nodes, err := b.StartNodes(ctx, n, spec)
	require.NoError(t, err)
	require.Len(t, nodes, n)
	return nodes
}

// dockerClient is a client of the test's own, to look at what the backend
// left behind.
func dockerClient(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(t.Context())
	require.NoError(t, err, "these tests need a Docker engine")
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// redisClient talks to one node without retries, each command bounded by
// 500ms, so a dead or frozen node shows as an error rather than a hang.
func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		MaxRetries:            -1,
		DialTimeout:           500 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		ContextTimeoutEnabled: true,
		PoolSize:              2,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pingWithin pings through a fresh connection bounded by d.
func pingWithin(t *testing.T, addr string, d time.Duration) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

func ctxOp(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestParseLdd(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string
		wantErr string
	}{
		{
			name: "debian redis-server",
			out: "\tlinux-vdso.so.1 (0x00007ffd)\n" +
				"\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f69)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f68)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f69b786e000)\n",
			want: []string{"/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"},
		},
		{
			name: "no address",
			out:  "\tlibc.so.6 => /usr/lib/libc.so.6\n",
			want: []string{"/usr/lib/libc.so.6"},
		},
		{
			name:    "missing library",
			out:     "\tlibfoo.so.1 => not found\n\tlibbar.so.2 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
			wantErr: "libraries not found: libfoo.so.1, libbar.so.2",
		},
		{
			name: "static",
			out:  "\tstatically linked\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := docker.ParseLdd([]byte(tt.out))
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestImageContext(t *testing.T) {
	tag, tarball, err := docker.ImageContext(t.Context())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(tag, docker.ImageRepo+":"), tag)

	entries := map[string]*tar.Header{}
	var dockerfile []byte
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		entries[h.Name] = h
		if h.Name == "Dockerfile" {
			dockerfile, err = io.ReadAll(tr)
			require.NoError(t, err)
		}
	}
	assert.Contains(t, string(dockerfile), "FROM scratch")
	assert.Contains(t, string(dockerfile), `ENTRYPOINT ["/usr/local/bin/redis-server"]`)
	for name, typ := range map[string]byte{
		"rootfs/usr/local/bin/redis-server": tar.TypeReg,
		"rootfs/lib64/ld-linux-x86-64.so.2": tar.TypeReg,
		"rootfs/data/":                      tar.TypeDir,
		"rootfs/tmp/":                       tar.TypeDir,
	} {
		if assert.Contains(t, entries, name) {
			assert.Equal(t, typ, entries[name].Typeflag, name)
		}
	}
	assert.Equal(t, int64(0o1777), entries["rootfs/tmp/"].Mode)
	var libc bool
	for name, h := range entries {
		assert.NotEqual(t, byte(tar.TypeSymlink), h.Typeflag, "%s: symlinks must be dereferenced", name)
		libc = libc || strings.HasSuffix(name, "/libc.so.6")
	}
	assert.True(t, libc, "libc.so.6 is copied")

	// Deterministic: the same host gives the same tag.
	tag2, _, err := docker.ImageContext(t.Context())
	require.NoError(t, err)
	assert.Equal(t, tag, tag2)
}

func TestImageBuiltAndReused(t *testing.T) {
	start := time.Now()
	b1 := newBackend(t)
	t.Logf("first NewBackend: %v (built=%v), image %s", time.Since(start), docker.Built(b1), b1.Image())
	require.True(t, strings.HasPrefix(b1.Image(), docker.ImageRepo+":"), b1.Image())

	cli := dockerClient(t)
	img1, err := cli.ImageInspect(t.Context(), b1.Image())
	require.NoError(t, err)

	start = time.Now()
	b2 := newBackend(t)
	took := time.Since(start)
	t.Logf("second NewBackend: %v", took)
	assert.False(t, docker.Built(b2), "second backend must reuse the image")
	assert.Equal(t, b1.Image(), b2.Image())
	assert.Less(t, took, 5*time.Second)
	img2, err := cli.ImageInspect(t.Context(), b2.Image())
	require.NoError(t, err)
	assert.Equal(t, img1.ID, img2.ID, "no rebuild")
	assert.Equal(t, []string{"/usr/local/bin/redis-server"}, img2.Config.Entrypoint)
	assert.NotEqual(t, b1.ID(), b2.ID(), "each backend has its own suffix")
	assert.Equal(t, "docker", b2.Name())

	// WithImage runs any local image with redis-server on its PATH, here
	// the one just built, without building anything.
	b3 := newBackend(t, docker.WithImage(b1.Image()))
	assert.False(t, docker.Built(b3))
	assert.Equal(t, b1.Image(), b3.Image())
	n := startNodes(t, b3, 1, chaos.NodeSpec{})[0]
	assert.NoError(t, pingWithin(t, n.Addr(), 2*time.Second))
}

// The docker backend passes the backends' conformance suite.
func TestBackend(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) chaos.Backend { return newBackend(t) },
		backendtest.Errs{NotRunning: docker.ErrNotRunning, NoClock: docker.ErrNoClock, Closed: docker.ErrClosed})
}

// A node's errors name the node and the operation.
func TestNodeError(t *testing.T) {
	n := startNodes(t, newBackend(t), 1, chaos.NodeSpec{})[0]
	require.NoError(t, n.Kill(ctxOp(t)))
	var ne *docker.NodeError
	if assert.ErrorAs(t, n.Pause(ctxOp(t)), &ne) {
		assert.Equal(t, "pause", ne.Op)
		assert.Equal(t, "n0", ne.Node)
		assert.ErrorIs(t, ne, docker.ErrNotRunning)
	}
}

func TestCloseRemovesContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, err := docker.NewBackend(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		t.Fatalf("these tests need a Docker engine and none answers: %v", err)
	}
	require.NoError(t, err)
	nodes := startNodes(t, b, 3, chaos.NodeSpec{Clock: true})
	cli := dockerClient(t)
	list := func() []string {
		res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
			All:     true,
			Filters: make(client.Filters).Add("label", docker.LabelBackend+"="+b.ID()),
		})
		require.NoError(t, err)
		var names []string
		for _, c := range res.Items {
			names = append(names, c.Names...)
		}
		return names
	}
	require.Len(t, list(), 3)

	// Leave the nodes in every state: killed, paused, and closed already.
	require.NoError(t, nodes[0].Kill(ctxOp(t)))
	require.NoError(t, nodes[1].Pause(ctxOp(t)))
	require.NoError(t, nodes[2].Close())
	require.NoError(t, nodes[2].Close(), "Node.Close is idempotent")
	assert.ErrorIs(t, nodes[2].Start(ctxOp(t)), docker.ErrClosed)
	assert.ErrorIs(t, nodes[2].SetClockOffset(ctxOp(t), time.Second), docker.ErrClosed)
	assert.Len(t, list(), 2)

	// Close nodes concurrently with the backend: no error, no leftovers.
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, nodes[1].Close()) })
	require.NoError(t, b.Close())
	wg.Wait()
	assert.Empty(t, list(), "no container is left behind")
	assert.NoError(t, b.Close(), "Backend.Close is idempotent")
	_, err = b.StartNodes(ctxOp(t), 1, chaos.NodeSpec{})
	assert.ErrorIs(t, err, docker.ErrClosed)
	assert.ErrorIs(t, nodes[0].Start(ctxOp(t)), docker.ErrClosed)
	assert.Error(t, pingWithin(t, nodes[1].Addr(), time.Second))
}

func TestCloseCancelsStartNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, err := docker.NewBackend(ctx, docker.WithStartTimeout(time.Minute))
	require.NoError(t, err)
	cli := dockerClient(t)
	running := func() int {
		res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
			Filters: make(client.Filters).Add("label", docker.LabelBackend+"="+b.ID()),
		})
		require.NoError(t, err)
		return len(res.Items)
	}

	// The node runs but never answers PING (renamed away), so StartNodes
	// waits for it until Close. (A --port of its own no longer works: the
	// containers share the host's network, and the backend's own --port
	// comes last and wins, so the node answered and StartNodes could return
	// before Close.)
	done := make(chan error, 1)
	go func() {
		_, err := b.StartNodes(ctx, 1, chaos.NodeSpec{Args: []string{"--rename-command", "PING", "NOPE"}})
		done <- err
	}()
	require.Eventually(t, func() bool { return running() == 1 }, 30*time.Second, 50*time.Millisecond,
		"the container starts")
	start := time.Now()
	require.NoError(t, b.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, docker.ErrClosed)
	case <-ctx.Done():
		t.Fatal("StartNodes did not return after Close")
	}
	assert.Less(t, time.Since(start), 20*time.Second, "Close does not wait out the start timeout")
	assert.Zero(t, running(), "no container is left behind")
}

func TestStartNodesRejectsBadInput(t *testing.T) {
	b := newBackend(t)
	for _, n := range []int{0, -1} {
		_, err := b.StartNodes(ctxOp(t), n, chaos.NodeSpec{})
		assert.ErrorContains(t, err, "n must be positive")
	}
	_, err := b.StartNodes(ctxOp(t), 1, chaos.NodeSpec{Persistence: chaos.Persistence(42)})
	assert.ErrorContains(t, err, "unknown persistence 42")
}

func TestStartNodesBadArgsFailsFast(t *testing.T) {
	b := newBackend(t, docker.WithStartTimeout(20*time.Second))
	start := time.Now()
	_, err := b.StartNodes(ctxOp(t), 2, chaos.NodeSpec{Args: []string{"--no-such-option", "x"}})
	require.ErrorIs(t, err, docker.ErrNotReady)
	assert.ErrorContains(t, err, "no-such-option", "the error carries redis-server's output")
	assert.Less(t, time.Since(start), 15*time.Second, "an exited container is noticed before the timeout")
}

func TestWithImageMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := docker.NewBackend(ctx, docker.WithImage("redfence/no-such-image:0"))
	assert.ErrorContains(t, err, "docker: image redfence/no-such-image:0 is not present and cannot be pulled")
}

func TestOptionsValidated(t *testing.T) {
	for name, opt := range map[string]docker.Option{
		"empty image":      docker.WithImage(""),
		"zero timeout":     docker.WithStartTimeout(0),
		"negative timeout": docker.WithStartTimeout(-time.Second),
		"nil logger":       docker.WithLogger(nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := docker.NewBackend(t.Context(), opt)
			assert.ErrorContains(t, err, "docker: invalid option")
		})
	}
}

func TestNoDocker(t *testing.T) {
	for _, host := range []string{"unix:///nonexistent/docker.sock", "tcp://127.0.0.1:1"} {
		t.Run(host, func(t *testing.T) {
			defer docker.SetDockerHost(host)()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := docker.NewBackend(ctx)
			require.ErrorIs(t, err, docker.ErrNoDocker)
			assert.ErrorContains(t, err, "no Docker engine answers")
		})
	}
}

// TestSentinels starts a node, a replica of it at its Addr (on the host's
// network, containers reach each other there) and a Sentinel container
// monitoring it there: the Sentinel names the primary, up, and finds the
// replica at its Addr.
func TestSentinels(t *testing.T) {
	b := newBackend(t)
	nodes := startNodes(t, b, 2, chaos.NodeSpec{})
	ctx := ctxOp(t)
	pp, rp := nodes[0].Addr(), nodes[1].Addr()
	assert.NotEqual(t, pp, rp)
	host, port, err := net.SplitHostPort(pp)
	require.NoError(t, err)
	rc := redisClient(t, nodes[1].Addr())
	require.NoError(t, rc.Do(ctx, "REPLICAOF", host, port).Err())
	require.Eventually(t, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 20*time.Second, 20*time.Millisecond, "the replica reaches the primary at %s", pp)

	sentinels, err := b.StartSentinels(ctx, 1, "sentinel monitor m "+host+" "+port+" 1\nsentinel down-after-milliseconds m 1000\n")
	require.NoError(t, err)
	require.Len(t, sentinels, 1)
	assert.Equal(t, "s0", sentinels[0].Name())
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0].Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = sc.Close() })
	require.Eventually(t, func() bool {
		m, err := sc.Master(ctx, "m").Result()
		if err != nil || m["flags"] != "master" || net.JoinHostPort(m["ip"], m["port"]) != pp {
			return false
		}
		replicas, err := sc.Replicas(ctx, "m").Result()
		return err == nil && len(replicas) == 1 && net.JoinHostPort(replicas[0]["ip"], replicas[0]["port"]) == rp && replicas[0]["flags"] == "slave"
	}, 20*time.Second, 50*time.Millisecond, "the Sentinel sees the primary up at %s and its replica at %s", pp, rp)
}

// TestAddrFixed: a node's Addr stays the same across Kill and Start, a
// node started while it is down does not get its address, and the
// containers run on the host's network (so they reach each other at their
// Addr).
func TestAddrFixed(t *testing.T) {
	b := newBackend(t)
	n := startNodes(t, b, 1, chaos.NodeSpec{})[0]
	ctx := ctxOp(t)
	before := n.Addr()
	res, err := dockerClient(t).ContainerInspect(ctx, n.(*docker.Node).ContainerID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "host", string(res.Container.HostConfig.NetworkMode), "on the host's network")

	require.NoError(t, n.Kill(ctx))
	other := startNodes(t, b, 1, chaos.NodeSpec{})[0]
	assert.NotEqual(t, before, other.Addr(), "a node started while n0 is down does not take its address")
	require.NoError(t, n.Start(ctx))
	after := n.Addr()
	assert.Equal(t, before, after, "Addr is stable across Kill and Start")
	require.NoError(t, redisClient(t, after).Ping(ctx).Err(), "the restarted node answers there")
}
