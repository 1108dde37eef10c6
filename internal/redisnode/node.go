package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// EnvBinary names the environment variable consulted for the redis-server
// path when Options.Binary is empty.
const EnvBinary = "REDFENCE_REDIS_SERVER"

// DefaultStartTimeout bounds the wait for a freshly started process to
// answer PING when Options.StartTimeout is zero.
const DefaultStartTimeout = 10 * time.Second

// portAttempts is how many free ports Start tries when Options.Port is zero
// and redis-server fails to bind the one it was given.
const portAttempts = 3

const (
	logFileName    = "redis.log"
	stderrFileName = "redis.stderr"
)

// Options configures a Node. The zero value is usable.
type Options struct {
	// Binary is the redis-server executable. Empty means $REDFENCE_REDIS_SERVER,
	// else "redis-server" looked up on PATH. The name is passed as argv[0]
	// unchanged, which matters because Redis picks its mode from argv[0].
	Binary string
	// Dir is the data and working directory. Empty means a fresh temporary
	// directory that Close removes; a given directory is created if missing
	// and left in place by Close.
	Dir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free port, retrying
	// with another one if redis-server fails to bind it.
	Port int
	// AppendFsyncAlways enables the append-only file with fsync on every
	// write, so data survives Kill and Restart. When false persistence is
	// off entirely and a restarted node comes back empty.
	AppendFsyncAlways bool
	// Args are extra redis-server arguments, appended last so they override
	// the defaults.
	Args []string
	// ConfigFile, if set, is passed as redis-server's first argument, the
	// only place Redis reads a config file from. Sentinel needs one (run
	// with Args "--sentinel"): it rewrites it to record its state. A
	// relative path is taken relative to the current directory. Empty
	// means no config file.
	ConfigFile string
	// StartTimeout bounds the wait for the process to answer PING on Start
	// and Restart. Zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Env is extra environment for the process, as "KEY=value" entries
	// added to this process's environment (a later entry for the same key
	// wins), for example LD_PRELOAD. Restart uses the same environment.
	// Empty means the process inherits this process's environment unchanged.
	Env []string
}

// Node is one redis-server process on 127.0.0.1. Its address and directory
// stay the same across restarts. All methods are safe for concurrent use.
type Node struct {
	binary  string
	dir     string
	ownDir  bool
	port    int
	addr    string
	args    []string
	env     []string // nil: inherit; else the full environment
	timeout time.Duration

	// life serialises Restart and Close so that Close never removes the
	// directory under a process that Restart is launching. It is held while
	// waiting for readiness, so nothing else takes it.
	life    sync.Mutex
	cleaned bool // guarded by life

	mu      sync.Mutex
	cur     *proc         // latest process, nil when none was started or it was killed
	paused  bool          // cur has been sent SIGSTOP and not SIGCONT
	closed  bool          // Close has been called
	closing chan struct{} // closed by the first Close; aborts readiness waits
}

// proc is one launched redis-server process.
type proc struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed by the reaper after cmd.Wait returns
	waitErr error         // written before exited is closed
	logOff  int64         // size of the log file before this process started
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Start launches redis-server as described by opts and waits until it answers
// PING, bounded by ctx and opts.StartTimeout. The context only bounds the
// start; the process runs until Kill or Close.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if ctx == nil {
		return nil, errors.New("redisnode: Start called with a nil context")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("redisnode: invalid port %d: want 0 (pick a free port) or 1-65535", opts.Port)
	}
	if opts.StartTimeout < 0 {
		return nil, fmt.Errorf("redisnode: invalid StartTimeout %v: must not be negative", opts.StartTimeout)
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, err
	}
	if opts.ConfigFile != "" {
		abs, err := filepath.Abs(opts.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("redisnode: config file %q: %w", opts.ConfigFile, err)
		}
		opts.ConfigFile = abs
	}
	bin, err := resolveBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	n := &Node{
		binary:  bin,
		timeout: opts.StartTimeout,
		closing: make(chan struct{}),
	}
	if len(opts.Env) > 0 {
		n.env = append(os.Environ(), opts.Env...)
	}
	if n.timeout == 0 {
		n.timeout = DefaultStartTimeout
	}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "redfence-redis-")
		if err != nil {
			return nil, fmt.Errorf("redisnode: creating data directory: %w", err)
		}
		n.dir, n.ownDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("redisnode: data directory %q: %w", opts.Dir, err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("redisnode: creating data directory: %w", err)
		}
		n.dir = d
	}

	attempts := 1
	if opts.Port == 0 {
		attempts = portAttempts
	}
	for i := 0; i < attempts; i++ {
		port := opts.Port
		if port == 0 {
			if port, err = pickPort(); err != nil {
				break
			}
		}
		n.port = port
		n.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		n.args = buildArgs(port, n.dir, opts)
		if err = n.launch(ctx); err == nil {
			return n, nil
		}
		var se *StartError
		if !errors.As(err, &se) || !se.exited() || !isBindFailure(se.LogTail) {
			break
		}
	}
	if n.ownDir {
		if rmErr := os.RemoveAll(n.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("redisnode: removing data directory: %w", rmErr))
		}
	}
	return nil, err
}

// StartN starts n nodes, each with its own port and directory, sharing the
// remaining options. opts.Port and opts.Dir must be zero when n > 1. If any
// node fails to start, the ones already started are closed.
func StartN(ctx context.Context, n int, opts Options) ([]*Node, error) {
	if n < 0 {
		return nil, fmt.Errorf("redisnode: StartN: invalid node count %d", n)
	}
	if n > 1 && (opts.Port != 0 || opts.Dir != "") {
		return nil, fmt.Errorf("redisnode: StartN: Port and Dir must be zero when starting %d nodes (got Port=%d Dir=%q)", n, opts.Port, opts.Dir)
	}
	nodes := make([]*Node, 0, min(n, 64))
	for i := 0; i < n; i++ {
		node, err := Start(ctx, opts)
		if err != nil {
			err = fmt.Errorf("redisnode: StartN: node %d of %d: %w", i+1, n, err)
			for _, started := range nodes {
				if cErr := started.Close(); cErr != nil {
					err = errors.Join(err, cErr)
				}
			}
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// Addr returns "127.0.0.1:PORT"; it does not change across restarts.
func (n *Node) Addr() string { return n.addr }

// Port returns the node's TCP port.
func (n *Node) Port() int { return n.port }

// Dir returns the node's data directory.
func (n *Node) Dir() string { return n.dir }

// Running reports whether the node's process is alive (possibly paused).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cur != nil && !n.cur.hasExited()
}

// Pause stops the process with SIGSTOP. It keeps its sockets, so clients can
// connect but get no answers until Resume.
func (n *Node) Pause() error {
	return n.signalLive(syscall.SIGSTOP, "pause", true)
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error {
	return n.signalLive(syscall.SIGCONT, "resume", false)
}

func (n *Node) signalLive(sig syscall.Signal, verb string, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur == nil || n.cur.hasExited() {
		return fmt.Errorf("redisnode: cannot %s %s: %w", verb, n.addr, ErrNotRunning)
	}
	if err := n.cur.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("redisnode: cannot %s %s: %w", verb, n.addr, ErrNotRunning)
		}
		return fmt.Errorf("redisnode: %s %s: %w", verb, n.addr, err)
	}
	n.paused = paused
	return nil
}

// Kill sends SIGKILL (which also ends a paused process) and waits until the
// process has been reaped. Killing a node that is not running returns nil.
// A Kill racing with Restart may kill the new process, failing the Restart.
func (n *Node) Kill() error {
	n.mu.Lock()
	p := n.cur
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	return n.killProc(p)
}

func (n *Node) killProc(p *proc) error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisnode: killing redis-server on %s (pid %d): %w", n.addr, p.cmd.Process.Pid, err)
	}
	<-p.exited
	n.mu.Lock()
	if n.cur == p {
		n.cur = nil
		n.paused = false
	}
	n.mu.Unlock()
	return nil
}

// Restart kills the process if it is running and starts a new one on the
// same port and directory with the same arguments, waiting until it answers
// PING, bounded by ctx and the start timeout.
func (n *Node) Restart(ctx context.Context) error {
	if ctx == nil {
		return errors.New("redisnode: Restart called with a nil context")
	}
	n.life.Lock()
	defer n.life.Unlock()
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return fmt.Errorf("redisnode: cannot restart %s: %w", n.addr, ErrClosed)
	}
	if err := n.Kill(); err != nil {
		return err
	}
	return n.launch(ctx)
}

// Close kills the process, waits for it to be reaped and removes the data
// directory if Start created it. It aborts a Restart that is waiting for the
// process to become ready. Calling Close again returns nil.
func (n *Node) Close() error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.closing)
	}
	n.mu.Unlock()

	n.life.Lock()
	defer n.life.Unlock()
	if n.cleaned {
		return nil
	}
	n.cleaned = true
	err := n.Kill()
	if n.ownDir {
		if rmErr := os.RemoveAll(n.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("redisnode: removing data directory of %s: %w", n.addr, rmErr))
		}
	}
	return err
}
