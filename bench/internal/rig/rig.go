// Package rig starts throw-away redis-server processes for the benchmarks,
// on free loopback ports or on another Host (a network namespace behind a
// link): no persistence (save and appendonly off), a temporary data
// directory each, and SIGKILL to the child if this process dies.
//
// It is a small copy of what the root module's internal/redisnode does, which
// a separate module cannot import.
package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvBinary names the variable consulted for the redis-server path, as in the
// root module's test rig.
const EnvBinary = "REDFENCE_REDIS_SERVER"

// Host says where nodes run: the address they bind (and clients dial),
// the command prefix that starts a process there, and how a port is picked.
// The zero Host is Loopback.
type Host struct {
	// IP is the address nodes bind; "" is 127.0.0.1.
	IP string
	// Enter is prepended to the redis-server command line (for example
	// nsenter into a network namespace); it must exec the command, not fork
	// it, so that the process started is the node. nil: none.
	Enter []string
	// Port picks the port of a new node; nil: a free loopback port.
	Port func() (int, error)
}

// Loopback is the default Host: 127.0.0.1, free ports, no prefix.
var Loopback = Host{}

func (h Host) ip() string {
	if h.IP == "" {
		return "127.0.0.1"
	}
	return h.IP
}

// Node is one redis-server process.
type Node struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
	err    error
}

// Binary returns the redis-server executable to run.
func Binary() (string, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		bin = "redis-server"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("rig: redis-server not found (%v); run `bash scripts/ensure-redis.sh` from the repository root or set %s", err, EnvBinary)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p, nil
}

// Version returns the output of `redis-server --version`, trimmed.
func Version() string {
	bin, err := Binary()
	if err != nil {
		return "unknown"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, " sha="); i > 0 {
		s = s[:i]
	}
	return s
}

// StartN starts n nodes on loopback. On error the ones already started are
// closed.
func StartN(ctx context.Context, n int) ([]*Node, error) { return Loopback.StartN(ctx, n) }

// StartN starts n nodes on h. On error the ones already started are closed.
func (h Host) StartN(ctx context.Context, n int) ([]*Node, error) {
	nodes := make([]*Node, 0, n)
	for i := 0; i < n; i++ {
		nd, err := h.Start(ctx)
		if err != nil {
			CloseAll(nodes)
			return nil, fmt.Errorf("rig: node %d of %d: %w", i+1, n, err)
		}
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

// CloseAll closes every node, returning the joined errors.
func CloseAll(nodes []*Node) error {
	var err error
	for _, n := range nodes {
		if n != nil {
			err = errors.Join(err, n.Close())
		}
	}
	return err
}

// Start launches one redis-server on a free loopback port and waits until it
// answers, retrying on another port if the one picked was taken in the
// meantime.
func Start(ctx context.Context) (*Node, error) { return Loopback.Start(ctx) }

// Start launches one redis-server on h and waits until it answers, retrying
// on another port if the one picked was taken in the meantime.
func (h Host) Start(ctx context.Context) (*Node, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockbench-redis-")
	if err != nil {
		return nil, fmt.Errorf("rig: temp dir: %w", err)
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		pick := h.Port
		if pick == nil {
			pick = freePort
		}
		port, err := pick()
		if err != nil {
			last = err
			continue
		}
		n, err := h.launch(ctx, bin, dir, port)
		if err == nil {
			return n, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func (h Host) launch(ctx context.Context, bin, dir string, port int) (*Node, error) {
	out, err := os.Create(filepath.Join(dir, "redis.stderr"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	argv := append(slices.Clone(h.Enter), bin,
		"--bind", h.ip(),
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
	)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rig: starting %s: %w", argv[0], err)
	}
	n := &Node{addr: net.JoinHostPort(h.ip(), strconv.Itoa(port)), dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(n.exited)
	}()
	if err := n.waitReady(ctx, cmd.Process.Pid); err != nil {
		n.kill()
		b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		if len(b) == 0 { // nothing logged: a prefix (h.Enter) may have failed
			b, _ = os.ReadFile(filepath.Join(dir, "redis.stderr"))
		}
		return nil, fmt.Errorf("rig: redis-server on %s: %w; log tail: %s", n.addr, err, tail(string(b), 5))
	}
	return n, nil
}

// waitReady polls INFO server until it answers with the process's own pid.
func (n *Node) waitReady(ctx context.Context, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: 250 * time.Millisecond,
		ReadTimeout: 250 * time.Millisecond, PoolSize: 1, ContextTimeoutEnabled: true, Protocol: 2})
	defer c.Close()
	want := "process_id:" + strconv.Itoa(pid)
	for {
		info, err := c.Info(ctx, "server").Result()
		if err == nil {
			if strings.Contains(info, want+"\r\n") || strings.Contains(info, want+"\n") {
				return nil
			}
			err = errors.New("another process answers on this port")
		}
		select {
		case <-n.exited:
			return fmt.Errorf("exited while starting (last probe: %v)", err)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last probe: %v)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ReplicaOf makes n a replica of primary and waits, bounded by 20s, until
// primary reports it online and it acknowledges a write (WAIT), as a lock
// write with replica acknowledgement needs. The primary starts the full
// sync at once (repl-diskless-sync-delay 0).
func (n *Node) ReplicaOf(ctx context.Context, primary *Node) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	opts := func(addr string) *redis.Options {
		return &redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2}
	}
	pc := redis.NewClient(opts(primary.addr))
	defer pc.Close()
	rc := redis.NewClient(opts(n.addr))
	defer rc.Close()
	if err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return fmt.Errorf("rig: %s: %w", primary.addr, err)
	}
	host, port, _ := net.SplitHostPort(primary.addr)
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("rig: REPLICAOF on %s: %w", n.addr, err)
	}
	conn := pc.Conn()
	defer conn.Close()
	// A write made before the replica is online is in its snapshot, and
	// WAIT would count it at once: only a write after that shows that new
	// writes reach it.
	online := false
	for {
		var err error
		if !online {
			var info string
			if info, err = conn.Info(ctx, "replication").Result(); err == nil {
				online = strings.Contains(info, ",state=online,")
			}
		} else {
			_ = conn.Set(ctx, "rig:online", "1", 0).Err()
			_ = conn.Del(ctx, "rig:online").Err()
			var acked int
			if acked, err = conn.Do(ctx, "WAIT", 1, 100).Int(); err == nil && acked >= 1 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rig: %s does not acknowledge writes of %s: %w (last: %v)", n.addr, primary.addr, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Addr returns "IP:PORT" (127.0.0.1 on loopback).
func (n *Node) Addr() string { return n.addr }

// Pid returns the node's process id.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

func (n *Node) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// Close kills the process, waits for it and removes its directory. It is safe
// to call more than once and from several goroutines.
func (n *Node) Close() error {
	n.once.Do(func() {
		n.kill()
		n.err = os.RemoveAll(n.dir)
	})
	return n.err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("rig: picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
