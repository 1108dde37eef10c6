package pgtest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/redfence/redfence/internal/freeport"
)

const (
	// startTimeout bounds initdb plus the wait for the server to accept
	// connections.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds the wait for a fast shutdown before SIGKILL.
	stopTimeout = 30 * time.Second
	// portAttempts is how many free ports start tries when postgres fails
	// to bind the one it was given (another process took it meanwhile).
	portAttempts = 3
	// superuser is the bootstrap superuser initdb creates.
	superuser = "postgres"
	// readyLine is what the postmaster logs once it accepts connections
	// (messages are forced to English with lc_messages=C).
	readyLine = "database system is ready to accept connections"
)

// server is one PostgreSQL postmaster process and its directory.
type server struct {
	dir  string // temporary root: data/ and the log live here
	port int

	cmd     *exec.Cmd
	exited  chan struct{} // closed by the reaper after cmd.Wait returns
	waitErr error         // written before exited is closed
	logDone chan struct{} // closed when the log reader saw EOF
	log     *logBuffer

	admin *sql.DB // connected to the "postgres" database

	stopOnce sync.Once
	stopErr  error
}

// startServer runs initdb in a fresh temporary directory, starts postgres on
// a free loopback port and connects to it.
func startServer(ctx context.Context, binDir string) (_ *server, err error) {
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redfence-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: creating the server directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir) // the start error is what matters
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: giving %s to the %s user: %w", dir, superuser, err)
		}
	}

	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = sysProcAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf(" (initdb runs as the %s user, who must be able to reach %s)", superuser, dir)
		}
		return nil, fmt.Errorf("pgtest: initdb failed%s: %w\n%s", hint, err, lastLines(string(out), 20))
	}

	for attempt := 1; ; attempt++ {
		port, err := freeport.Pick()
		if err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		s := &server{dir: dir, port: port}
		err = s.spawn(ctx, binDir, data, cred)
		if err == nil {
			if err := s.connect(ctx); err != nil {
				return nil, errors.Join(err, s.stop(false))
			}
			return s, nil
		}
		if !errors.Is(err, errBind) || attempt == portAttempts {
			return nil, err
		}
	}
}

var errBind = errors.New("could not bind its port")

// spawn starts postgres and waits for it to log readiness. On failure the
// process has been reaped.
func (s *server) spawn(ctx context.Context, binDir, data string, cred *syscall.Credential) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pgtest: creating the log pipe: %w", err)
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "lc_messages=C",
	)
	cmd.Dir = s.dir
	// The log goes to a pipe read by our own goroutine, not to an
	// io.Writer: exec would then run a copying goroutine that Wait waits
	// for, and every backend holds the pipe open too.
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = sysProcAttr(cred)
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	w.Close() // the children have their own descriptors

	s.cmd = cmd
	s.exited = make(chan struct{})
	s.logDone = make(chan struct{})
	s.log = &logBuffer{ready: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	go func() {
		defer close(s.logDone)
		defer r.Close()
		s.log.readFrom(r)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-s.log.ready:
		return nil
	case <-s.exited:
		<-s.logDone // the pipe is closed once the postmaster and its children are gone
		tail := s.log.tail()
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "Address already in use") {
			return fmt.Errorf("pgtest: postgres on port %d %w:\n%s", s.port, errBind, tail)
		}
		if s.waitErr == nil {
			return fmt.Errorf("pgtest: postgres exited while starting (exit status 0):\n%s", tail)
		}
		return fmt.Errorf("pgtest: postgres exited while starting (%w):\n%s", s.waitErr, tail)
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("not ready within %v", startTimeout)
	}
	stopErr := s.stop(false)
	return errors.Join(fmt.Errorf("pgtest: postgres on port %d did not start: %w:\n%s", s.port, err, s.log.tail()), stopErr)
}

// connect opens the admin connection and checks that it works.
func (s *server) connect(ctx context.Context) error {
	db, err := sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: opening the admin connection: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // the ping error is what matters
		return fmt.Errorf("pgtest: connecting to postgres on port %d: %w", s.port, err)
	}
	s.admin = db
	return nil
}

// dsn returns the connection string for database name.
func (s *server) dsn(name string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", s.port, superuser, name)
}

// stop closes the admin connection, shuts the server down (fast shutdown,
// then SIGKILL after stopTimeout), waits for the log reader to finish and,
// if removeDir, removes the directory. Later calls return the first result.
func (s *server) stop(removeDir bool) error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.admin != nil {
			if err := s.admin.Close(); err != nil {
				errs = append(errs, fmt.Errorf("pgtest: closing the admin connection: %w", err))
			}
		}
		// SIGINT is PostgreSQL's fast shutdown: it ends the sessions, checkpoints and exits.
		if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("pgtest: signalling postgres (pid %d): %w", s.cmd.Process.Pid, err))
		}
		timer := time.NewTimer(stopTimeout)
		select {
		case <-s.exited:
		case <-timer.C:
			errs = append(errs, fmt.Errorf("pgtest: postgres (pid %d) ignored fast shutdown for %v; killed it", s.cmd.Process.Pid, stopTimeout))
			_ = s.cmd.Process.Kill() // reaped below
			<-s.exited
		}
		timer.Stop()
		<-s.logDone
		if removeDir {
			if err := os.RemoveAll(s.dir); err != nil {
				errs = append(errs, fmt.Errorf("pgtest: removing %s: %w", s.dir, err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// running reports whether the postmaster process has not exited.
func (s *server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// serverCredential returns the credential to run initdb and postgres with:
// nil when not root, else the postgres user's.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(superuser)
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses to: need a %q user to run it as (the postgresql package creates one): %w", superuser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: user %q has a non-numeric uid %q or gid %q", superuser, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// logBuffer keeps the last lines the server logged and signals readiness.
type logBuffer struct {
	ready     chan struct{} // closed when readyLine is seen
	readyOnce sync.Once

	mu    sync.Mutex
	lines []string // the last maxLogLines lines
}

const maxLogLines = 50

func (b *logBuffer) readFrom(r *os.File) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		b.mu.Lock()
		b.lines = append(b.lines, line)
		if len(b.lines) > maxLogLines {
			b.lines = b.lines[len(b.lines)-maxLogLines:]
		}
		b.mu.Unlock()
		if strings.Contains(line, readyLine) {
			b.readyOnce.Do(func() { close(b.ready) })
		}
	}
	// A line longer than the scanner's limit stops the scan; keep draining
	// so that the server never blocks writing its log.
	_, _ = io.Copy(io.Discard, r)
}

func (b *logBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
