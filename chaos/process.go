package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/redfence/redfence/internal/redisnode"
)

// ErrBackendClosed is wrapped by the error StartNodes returns once the
// backend has been closed.
var ErrBackendClosed = errors.New("chaos: backend is closed")

// ProcessOption configures a ProcessBackend.
type ProcessOption interface {
	applyProcess(*processConfig)
}

type processConfig struct {
	redisServer string
}

type processOptionFunc func(*processConfig)

func (f processOptionFunc) applyProcess(c *processConfig) { f(c) }

// WithRedisServer sets the redis-server executable the backend runs. The
// default is $REDFENCE_REDIS_SERVER, else redis-server looked up on PATH.
func WithRedisServer(path string) ProcessOption {
	return processOptionFunc(func(c *processConfig) { c.redisServer = path })
}

// ProcessBackend is a Backend that runs each node as a local redis-server
// process on a free 127.0.0.1 port (outside the kernel's ephemeral port
// range, so that no other socket takes it while the node is down), in its
// own temporary directory: Kill is
// SIGKILL, Pause and Resume are SIGSTOP and SIGCONT, and Start runs a new
// process on the same port and directory. With NodeSpec.Clock each process
// preloads a gettimeofday shim (built once per backend with gcc) whose
// offset SetClockOffset rewrites.
//
// It is safe for concurrent use. Close stops every node it started.
type ProcessBackend struct {
	cfg processConfig

	mu     sync.Mutex
	nodes  []*processNode // guarded by mu
	seq    int            // guarded by mu: numbers offset files
	closed bool           // guarded by mu

	// shimMu guards the temporary directory and the shim built in it; it is
	// held while gcc runs so the shim is built once.
	shimMu     sync.Mutex
	dir        string // "" until the first node with Clock
	shim       string // path of the built shim, "" until built
	shimClosed bool
}

var (
	_ Backend = (*ProcessBackend)(nil)
	_ Node    = (*processNode)(nil)
)

// NewProcessBackend returns a backend that starts redis-server processes.
// It starts nothing until StartNodes.
func NewProcessBackend(opts ...ProcessOption) *ProcessBackend {
	b := &ProcessBackend{}
	for _, o := range opts {
		if o != nil {
			o.applyProcess(&b.cfg)
		}
	}
	return b
}

// Name implements Backend; it returns "process".
func (b *ProcessBackend) Name() string { return "process" }

// StartNodes implements Backend: it starts n redis-server processes named
// n0..n(n-1), each answering PING before StartNodes returns, and bounded by
// ctx. If one fails to start, the ones already started are closed.
func (b *ProcessBackend) StartNodes(ctx context.Context, n int, spec NodeSpec) ([]Node, error) {
	if err := liveCtx(ctx); err != nil {
		return nil, fmt.Errorf("chaos: start nodes: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("chaos: start nodes: invalid node count %d: want at least 1", n)
	}
	switch spec.Persistence {
	case NoPersistence, AOFAlways, RDBSnapshot:
	default:
		return nil, fmt.Errorf("chaos: start nodes: unknown persistence %d", spec.Persistence)
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("chaos: start nodes: %w", ErrBackendClosed)
	}
	var so, dir string
	if spec.Clock {
		var err error
		if so, dir, err = b.clockShim(ctx); err != nil {
			return nil, err
		}
	}

	started := make([]*processNode, 0, n)
	fail := func(err error) ([]Node, error) {
		for _, pn := range started {
			if cErr := pn.Close(); cErr != nil {
				err = errors.Join(err, cErr)
			}
		}
		return nil, err
	}
	for i := range n {
		pn, err := b.startNode(ctx, fmt.Sprintf("n%d", i), spec, so, dir)
		if err != nil {
			return fail(fmt.Errorf("chaos: start nodes: node %d of %d: %w", i+1, n, err))
		}
		started = append(started, pn)
	}
	nodes := make([]Node, n)
	for i, pn := range started {
		nodes[i] = pn
	}
	return nodes, nil
}

// startNode starts one process and registers it with the backend, unless
// the backend was closed meanwhile.
func (b *ProcessBackend) startNode(ctx context.Context, name string, spec NodeSpec, so, dir string) (*processNode, error) {
	b.mu.Lock()
	seq := b.seq
	b.seq++
	b.mu.Unlock()

	var args []string
	if spec.Persistence == RDBSnapshot {
		// redisnode's default without AOF, spelt out: no automatic saves, and
		// the dump file an explicit SAVE writes lives in the node's directory,
		// which a restart keeps and loads.
		args = append(args, "--save", "", "--appendonly", "no", "--dbfilename", "dump.rdb")
	}
	opts := redisnode.Options{
		Binary:            b.cfg.redisServer,
		AppendFsyncAlways: spec.Persistence == AOFAlways,
		Args:              append(args, spec.Args...),
	}
	pn := &processNode{name: name}
	if spec.Clock {
		env, offsetFile, err := clockEnv(so, dir, seq)
		if err != nil {
			return nil, err
		}
		opts.Env, pn.offsetFile = env, offsetFile
	}
	// A stable port, so that Start after Kill can bind it again.
	var startErr error
	for range stablePortAttempts {
		port, err := reserveStablePort()
		if err != nil {
			startErr = err
			break
		}
		opts.Port = port
		node, err := redisnode.Start(ctx, opts)
		if err == nil {
			pn.node, pn.port = node, port
			break
		}
		releaseStablePort(port)
		startErr = err
		var se *redisnode.StartError
		if port == 0 || !errors.As(err, &se) || !strings.Contains(se.LogTail, "Address already in use") {
			break
		}
	}
	if pn.node == nil {
		return nil, errors.Join(startErr, pn.removeOffsetFile())
	}
	return b.keep(pn)
}

// keep adds a started node to the ones Close closes, or closes it if the
// backend was closed meanwhile.
func (b *ProcessBackend) keep(pn *processNode) (*processNode, error) {
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.nodes = append(b.nodes, pn)
	}
	b.mu.Unlock()
	if closed {
		return nil, errors.Join(ErrBackendClosed, pn.Close())
	}
	return pn, nil
}

// Close implements Backend: it closes every node the backend started and
// removes its temporary directory. Calling it again returns nil.
func (b *ProcessBackend) Close() error {
	b.mu.Lock()
	nodes := b.nodes
	b.nodes, b.closed = nil, true
	b.mu.Unlock()

	var errs []error
	for _, pn := range nodes {
		errs = append(errs, pn.Close())
	}
	b.shimMu.Lock()
	defer b.shimMu.Unlock()
	b.shimClosed = true
	if b.dir != "" {
		if err := os.RemoveAll(b.dir); err != nil {
			errs = append(errs, fmt.Errorf("chaos: removing %s: %w", b.dir, err))
		}
		b.dir, b.shim = "", ""
	}
	return errors.Join(errs...)
}

// processNode is a Node backed by one redis-server process.
type processNode struct {
	name       string
	node       *redisnode.Node
	port       int       // from reserveStablePort, 0 if none
	offsetFile string    // "" without NodeSpec.Clock
	dir        string    // a Sentinel's directory, which Close removes; "" for a node
	release    sync.Once // releases port on the first Close
}

// Name implements Node.
func (n *processNode) Name() string { return n.name }

// Addr implements Node: 127.0.0.1:PORT, the same across Kill and Start.
func (n *processNode) Addr() string { return n.node.Addr() }

// Kill implements Node: SIGKILL, returning once the process is reaped.
// Killing a node that is not running returns nil.
func (n *processNode) Kill(ctx context.Context) error { return n.do(ctx, "kill", n.node.Kill) }

// do runs f, the node operation op, unless ctx is nil or done; its errors
// name the node and op.
func (n *processNode) do(ctx context.Context, op string, f func() error) error {
	if err := liveCtx(ctx); err != nil {
		return n.errorf(op, err)
	}
	if err := f(); err != nil {
		return n.errorf(op, err)
	}
	return nil
}

// Start implements Node: it runs a new process on the same port and
// directory and waits, bounded by ctx, until it answers PING. Starting a
// node that is running (or paused) does nothing.
func (n *processNode) Start(ctx context.Context) error {
	return n.do(ctx, "start", func() error {
		if n.node.Running() {
			return nil
		}
		return n.node.Restart(ctx)
	})
}

// Pause implements Node: SIGSTOP. The node keeps its sockets: connections
// are accepted by the kernel but nothing is answered until Resume.
func (n *processNode) Pause(ctx context.Context) error { return n.do(ctx, "pause", n.node.Pause) }

// Resume implements Node: SIGCONT.
func (n *processNode) Resume(ctx context.Context) error { return n.do(ctx, "resume", n.node.Resume) }

// Close implements Node: it kills the process and removes its directory
// and clock offset file. Calling it again returns nil.
func (n *processNode) Close() error {
	err := n.node.Close()
	if err != nil {
		err = n.errorf("close", err)
	}
	n.release.Do(func() {
		releaseStablePort(n.port)
		if n.dir != "" {
			if rmErr := os.RemoveAll(n.dir); rmErr != nil {
				err = errors.Join(err, n.errorf("close", rmErr))
			}
		}
	})
	return errors.Join(err, n.removeOffsetFile())
}

func (n *processNode) removeOffsetFile() error {
	if n.offsetFile == "" {
		return nil
	}
	if err := os.Remove(n.offsetFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return n.errorf("close", err)
	}
	return nil
}

func (n *processNode) errorf(op string, err error) error {
	return fmt.Errorf("chaos: node %s: %s: %w", n.name, op, err)
}

// liveCtx rejects a nil or already finished context.
func liveCtx(ctx context.Context) error {
	if ctx == nil {
		return errors.New("nil context")
	}
	return ctx.Err()
}
