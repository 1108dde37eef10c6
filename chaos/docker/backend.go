package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/redfence/redfence/chaos"
)

// envRyukDisabled is the testcontainers-go setting NewBackend sets to
// "true" when it is unset: Ryuk, the reaper container, would have to be
// pulled from a registry. The backend removes its containers itself
// (Close), and labels them with LabelBackend so leftovers of a crashed
// process can be found.
const envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"

const (
	// LabelBackend is set on every container a Backend starts; its value is
	// the backend's ID. Leftovers of a crashed process can be removed with
	//
	//	docker rm -f $(docker ps -aq --filter label=org.redfence.chaos.backend)
	LabelBackend = "org.redfence.chaos.backend"
	// labelNode is set on every container to the node's name ("n0").
	labelNode = "org.redfence.chaos.node"
)

const (
	// shimMount is where the backend's temporary directory (clock shim and
	// offset files) is bind-mounted, read-only, in containers that use it.
	shimMount = "/redfence"
	// pingDockerTimeout bounds NewBackend's check that an engine answers,
	// when the caller's context has no deadline.
	pingDockerTimeout = 15 * time.Second
	// cleanupTimeout bounds Close, which takes no context.
	cleanupTimeout = 30 * time.Second
	// portAttempts is how many pinned ports a node tries when the one it was
	// given was taken before Docker could bind it.
	portAttempts = 3
)

// Backend starts Redis nodes as Docker containers through testcontainers-go.
// It implements chaos.Backend. Methods are safe for concurrent use.
type Backend struct {
	cli        *testcontainers.DockerClient
	cfg        config
	id         string
	image      string
	entrypoint string
	built      bool
	imageFiles map[string]bool // files of the default image; nil with WithImage
	dir        string          // host temp dir: clock shim and offset files

	shimMu    sync.Mutex
	shim      string   // container path of the clock shim, once built
	shimBinds []string // host libraries the shim needs that the image lacks

	mu       sync.Mutex
	closed   bool
	closing  chan struct{} // closed by Close: cancels StartNodes in flight
	inflight sync.WaitGroup
	calls    int
	nodes    []*Node
}

var _ chaos.Backend = (*Backend)(nil)

// NewBackend connects to the Docker engine (DOCKER_HOST, the docker context
// or the default socket, as testcontainers-go resolves it) and prepares the
// image. Without WithImage it builds redfence/redis-scratch:<hash>, an image
// FROM scratch holding the host's redis-server ($REDFENCE_REDIS_SERVER or
// PATH), its shared libraries and the dynamic loader, unless an image with
// that content hash already exists; no registry is needed.
//
// It sets TESTCONTAINERS_RYUK_DISABLED=true in the process environment if
// that variable is unset (testcontainers-go reads its configuration once per
// process, so this must happen before any other testcontainers-go use).
//
// It returns an error wrapping ErrNoDocker when no engine answers and
// ErrNoRedisServer when the image must be built but redis-server is missing.
func NewBackend(ctx context.Context, opts ...Option) (*Backend, error) {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, ok := os.LookupEnv(envRyukDisabled); !ok {
		if err := os.Setenv(envRyukDisabled, "true"); err != nil {
			return nil, fmt.Errorf("docker: set %s: %w", envRyukDisabled, err)
		}
	}

	cli, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cli:        cli,
		cfg:        cfg,
		image:      strings.TrimSpace(cfg.image),
		entrypoint: "redis-server",
		closing:    make(chan struct{}),
	}
	ok := false
	defer func() {
		if !ok {
			_ = cli.Close()
			if b.dir != "" {
				_ = os.RemoveAll(b.dir)
			}
		}
	}()
	if b.image == "" {
		if b.image, b.imageFiles, b.built, err = ensureImage(ctx, cli, cfg.logger); err != nil {
			return nil, err
		}
		b.entrypoint = redisServerPath
	} else if err := ensurePulled(ctx, cli, b.image, cfg.logger); err != nil {
		return nil, err
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("docker: backend id: %w", err)
	}
	b.id = hex.EncodeToString(rnd[:])
	if b.dir, err = os.MkdirTemp("", "redfence-docker-"+b.id+"-"); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	// Readable by a non-root redis user in a WithImage container.
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	ok = true
	return b, nil
}

// connect makes a Docker client and checks that the engine answers.
func connect(ctx context.Context) (*testcontainers.DockerClient, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingDockerTimeout)
		defer cancel()
	}
	cli, err := newDockerClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDocker, err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoDocker, err)
	}
	return cli, nil
}

// newDockerClient makes the client; a variable so tests can point it at an
// engine that does not exist.
var newDockerClient = func(ctx context.Context) (cli *testcontainers.DockerClient, err error) {
	// Guard against testcontainers-go panicking on a broken Docker setup:
	// this package returns errors, never panics.
	defer func() {
		if r := recover(); r != nil {
			cli, err = nil, fmt.Errorf("testcontainers-go: %v", r)
		}
	}()
	return testcontainers.NewDockerClientWithOpts(ctx)
}

// Name implements chaos.Backend: "docker".
func (b *Backend) Name() string { return "docker" }

// ID is the random suffix in this backend's container names and the value
// of its LabelBackend label.
func (b *Backend) ID() string { return b.id }

// Image is the image reference the backend runs nodes from.
func (b *Backend) Image() string { return b.image }

// StartNodes implements chaos.Backend: it starts n containers (named
// redfence-<ID>-<call>-n<i>), in parallel, each on the host's network with
// Redis on a pinned free port of 127.0.0.1, and returns once each answers
// PING (each bounded by the start timeout, all by ctx). Redis runs with
//
//	--protected-mode no --dir /data --save ''
//
// plus --appendonly no (NoPersistence, RDBSnapshot) or --appendonly yes
// --appendfsync always (AOFAlways), then spec.Args, then --port <port>
// --bind 127.0.0.1. Data lives in the
// container's own filesystem (no volume): it survives Kill and Start. Only
// AOFAlways writes any by itself; with RDBSnapshot an explicit SAVE writes
// /data/dump.rdb, which the next Start loads. With spec.Clock every
// container preloads the clock shim.
// If any node fails, the others started by this call are removed.
func (b *Backend) StartNodes(ctx context.Context, n int, spec chaos.NodeSpec) ([]chaos.Node, error) {
	if n <= 0 {
		return nil, fmt.Errorf("docker: StartNodes: n must be positive, got %d", n)
	}
	args, err := redisArgs(spec)
	if err != nil {
		return nil, err
	}
	return b.start(ctx, "StartNodes", n, "n", spec.Clock, args, nil)
}

// start starts n containers named <prefix>0..<prefix>(n-1) running
// redis-server with args, each with files (container path: content)
// copied in before it starts (see StartNodes).
func (b *Backend) start(ctx context.Context, op string, n int, prefix string, clock bool, args []string, files map[string]string) ([]chaos.Node, error) {
	var err error
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("docker: %s: %w", op, ErrClosed)
	}
	b.calls++
	call := b.calls
	b.inflight.Add(1)
	b.mu.Unlock()
	defer b.inflight.Done()

	// Close cancels the start rather than waiting out the start timeout.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-b.closing:
			cancel(ErrClosed)
		case <-stop:
		}
	})
	defer func() {
		close(stop)
		watch.Wait()
	}()

	shim := ""
	if clock {
		if shim, err = b.clockShim(ctx); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, fmt.Errorf("docker: %s: %w", op, err)
	}

	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			nodes[i], errs[i] = b.startNode(ctx, call, fmt.Sprintf("%s%d", prefix, i), ports[i], clock, shim, args, files)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrClosed) {
			err = errors.Join(fmt.Errorf("docker: %s: %w", op, ErrClosed), err)
		}
		for _, nd := range nodes {
			if nd != nil {
				err = errors.Join(err, nd.Close()) // cleanup must run even when ctx is cancelled; Close (chaos.Node) takes no context and is bounded by cleanupTimeout
			}
		}
		return nil, err
	}
	out := make([]chaos.Node, n)
	for i, nd := range nodes {
		out[i] = nd
	}
	return out, nil
}

// Close implements chaos.Backend: it removes every container the backend
// started (also those of failed StartNodes calls, found by label) and its
// temporary directory, and closes the Docker client. It is idempotent;
// further StartNodes calls fail with ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.closing)
	b.mu.Unlock()
	b.inflight.Wait() // StartNodes calls in flight, now cancelled, finish

	b.mu.Lock()
	nodes := b.nodes
	b.nodes = nil
	b.mu.Unlock()

	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Go(func() { errs[i] = nd.Close() })
	}
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	errs = append(errs, b.removeLabelled(ctx))
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, fmt.Errorf("docker: remove %s: %w", b.dir, err))
	}
	errs = append(errs, b.cli.Close())
	return errors.Join(errs...)
}

// removeLabelled force-removes any container still carrying this backend's
// label: the safety net for containers whose start failed half-way.
func (b *Backend) removeLabelled(ctx context.Context) error {
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelBackend+"="+b.id),
	})
	if err != nil {
		return fmt.Errorf("docker: list containers of backend %s: %w", b.id, err)
	}
	var errs []error
	for _, c := range list.Items {
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}
