package redisnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redfence/redfence/internal/freeport"
)

// launch starts a process and waits for it to be ready; on failure the
// process is killed and reaped before launch returns.
func (n *Node) launch(ctx context.Context) error {
	p, err := n.spawn()
	if err != nil {
		return err
	}
	if err := n.waitReady(ctx, p); err != nil {
		// The wait error is what the caller needs; a kill failure here would
		// only mean the process is already gone.
		_ = n.killProc(p)
		return err
	}
	return nil
}

// spawn starts the process and its reaper goroutine.
func (n *Node) spawn() (*proc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("redisnode: cannot start %s: %w", n.addr, ErrClosed)
	}
	if n.cur != nil && !n.cur.hasExited() {
		return nil, fmt.Errorf("redisnode: cannot start %s: a redis-server process (pid %d) is still running", n.addr, n.cur.cmd.Process.Pid)
	}
	var logOff int64
	if fi, err := os.Stat(filepath.Join(n.dir, logFileName)); err == nil {
		logOff = fi.Size()
	}
	// stdout and stderr go to a file rather than a pipe: with a pipe, exec
	// would run copying goroutines and Wait would also wait for any forked
	// child still holding the pipe open.
	out, err := os.Create(filepath.Join(n.dir, stderrFileName))
	if err != nil {
		return nil, fmt.Errorf("redisnode: creating output file for %s: %w", n.addr, err)
	}
	defer out.Close() // the child has its own descriptor once started

	cmd := exec.Command(n.binary, n.args...)
	cmd.Dir = n.dir
	cmd.Env = n.env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisnode: starting %s for %s: %w", n.binary, n.addr, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), logOff: logOff}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	n.cur = p
	n.paused = false
	return p, nil
}

// pollInterval is the pause between readiness probes.
const pollInterval = 10 * time.Millisecond

// waitReady polls until p answers PING, p exits, the start timeout or ctx
// expires, or the node is closed. A watcher goroutine, which ends when
// waitReady returns, cancels an in-flight probe as soon as p exits or the
// node is closed.
func (n *Node) waitReady(parent context.Context, p *proc) error {
	timeoutCtx, cancelTimeout := context.WithTimeout(parent, n.timeout)
	defer cancelTimeout()
	ctx, stop := context.WithCancel(timeoutCtx)
	defer stop()
	go func() {
		select {
		case <-p.exited:
		case <-n.closing:
		case <-ctx.Done():
		}
		stop()
	}()

	pid := p.cmd.Process.Pid
	timer := time.NewTimer(pollInterval)
	defer timer.Stop()
	for {
		lastErr := probe(ctx, n.addr, pid)
		if lastErr == nil {
			return nil
		}
		timer.Reset(pollInterval)
		select {
		case <-timer.C:
			continue
		case <-ctx.Done():
		}
		se := &StartError{Addr: n.addr, PID: pid}
		select {
		case <-p.exited:
			se.Reason, se.Err = reasonExited, p.waitErr
		case <-n.closing:
			se.Reason, se.Err = "was closed while starting", ErrClosed
		default:
			if err := parent.Err(); err != nil {
				se.Reason = fmt.Sprintf("was not ready when the caller's context ended (last probe: %v)", lastErr)
				se.Err = err
			} else {
				se.Reason = fmt.Sprintf("did not answer PING within the start timeout of %v (last probe: %v)", n.timeout, lastErr)
				se.Err = timeoutCtx.Err()
			}
		}
		se.LogTail = n.logTail(p)
		return se
	}
}

// logTail returns the process's captured stderr and the part of the log file
// it wrote, each cut to its last lines.
func (n *Node) logTail(p *proc) string {
	const maxLines = 20
	var parts []string
	if b, err := os.ReadFile(filepath.Join(n.dir, stderrFileName)); err == nil {
		if s := lastLines(string(b), maxLines); s != "" {
			parts = append(parts, s)
		}
	}
	if f, err := os.Open(filepath.Join(n.dir, logFileName)); err == nil {
		defer f.Close()
		if _, err := f.Seek(p.logOff, 0); err == nil {
			var sb strings.Builder
			buf := make([]byte, 64<<10)
			for {
				k, err := f.Read(buf)
				sb.Write(buf[:k])
				if err != nil || sb.Len() > 1<<20 {
					break
				}
			}
			if s := lastLines(sb.String(), maxLines); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func isBindFailure(log string) bool {
	return strings.Contains(log, "Address already in use") ||
		strings.Contains(log, "Could not create server TCP listening socket")
}

func buildArgs(port int, dir string, opts Options) []string {
	var args []string
	if opts.ConfigFile != "" {
		args = append(args, opts.ConfigFile)
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(dir, logFileName),
		"--enable-debug-command", "yes",
	)
	if opts.AppendFsyncAlways {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	return append(args, opts.Args...)
}

// checkEnv rejects environment entries that are not KEY=value.
func checkEnv(env []string) error {
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("redisnode: invalid Env entry %d %q: want KEY=value", i, kv)
		}
	}
	return nil
}

// resolveBinary finds the redis-server executable without resolving
// symlinks, so argv[0] keeps the name redis-server.
func resolveBinary(bin string) (string, error) {
	source := "Options.Binary"
	if bin == "" {
		if env := os.Getenv(EnvBinary); env != "" {
			bin, source = env, "$"+EnvBinary
		} else {
			bin, source = "redis-server", "PATH"
		}
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w (looked for %q from %s: %w)", ErrNoBinary, bin, source, err)
	}
	// The process runs in the data directory, so a relative path would
	// resolve differently there.
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path, nil
}

// pickPort is replaced in tests to simulate port collisions.
var pickPort = freePort

// freePort asks the kernel for a free loopback port. Another process may take
// it before redis-server binds it; Start retries in that case.
func freePort() (int, error) {
	port, err := freeport.Pick()
	if err != nil {
		return 0, fmt.Errorf("redisnode: %w", err)
	}
	return port, nil
}
