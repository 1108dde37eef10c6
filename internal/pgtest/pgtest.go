package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dbTimeout bounds creating, connecting to and dropping one test database.
const dbTimeout = time.Minute

var (
	mainRunning atomic.Bool

	sharedOnce sync.Once
	sharedMu   sync.Mutex // guards sharedSrv against Main's stop
	sharedSrv  *server
	errShared  error
	stopped    bool // guarded by sharedMu
)

// Main runs the tests and then stops the shared server, if DB started one,
// and removes its directory. It returns m.Run's exit code, or 1 if the tests
// passed but stopping failed. Call it from TestMain; DB refuses to work
// without it.
func Main(m *testing.M) int {
	mainRunning.Store(true)
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Wrap returns m with a Run method that calls Main, for test runners that
// take a testing.M-like value, such as goleak.VerifyTestMain:
//
//	goleak.VerifyTestMain(pgtest.Wrap(m))
//
// goleak then looks for leaked goroutines after the server is stopped.
func Wrap(m *testing.M) interface{ Run() int } { return runner{m} }

type runner struct{ m *testing.M }

func (r runner) Run() int { return Main(r.m) }

// DB returns a connection pool (driver "pgx") to a new, empty database on the
// shared server, starting the server on first use. The database is dropped
// and the pool closed when the test ends. It fails the test, never skips it,
// if PostgreSQL is missing (with ErrNotFound's message) or cannot be started.
func DB(t testing.TB) *sql.DB {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("pgtest: DB needs the test binary's TestMain to call pgtest.Main (or run pgtest.Wrap(m)), which stops the server when the tests end")
	}
	srv, err := shared()
	if err != nil {
		t.Fatal(err)
	}

	name := dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if _, err := srv.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	db, err := sql.Open("pgx", srv.dsn(name))
	if err == nil {
		err = db.PingContext(ctx)
	}
	t.Cleanup(func() {
		if db != nil {
			if err := db.Close(); err != nil {
				t.Errorf("pgtest: closing the pool for database %s: %v", name, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		defer cancel()
		if _, err := srv.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	if err != nil {
		t.Fatalf("pgtest: connecting to database %s: %v", name, err)
	}
	return db
}

// shared starts the server on first use and returns it, or the error that
// starting it gave (which every later call returns too).
func shared() (*server, error) {
	sharedOnce.Do(func() {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		if stopped {
			errShared = fmt.Errorf("pgtest: DB called after Main stopped the server")
			return
		}
		binDir, err := findBinDir(os.Getenv(EnvBinDir), debianRoot, defaultLookPath)
		if err != nil {
			errShared = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		sharedSrv, errShared = startServer(ctx, binDir)
	})
	return sharedSrv, errShared
}

// stopShared stops the shared server if one was started.
func stopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	stopped = true
	if sharedSrv == nil {
		return nil
	}
	return sharedSrv.stop(true)
}

var dbSeq atomic.Int64

// dbName returns a database name unique to this process and call, built from
// the test name: "t", a sequence number, the lower-cased test name with
// characters other than letters and digits replaced by '_', and 6 random hex
// digits, at most 63 bytes (PostgreSQL's identifier limit), so it never
// needs quoting.
func dbName(testName string) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	prefix := fmt.Sprintf("t%d_", dbSeq.Add(1))
	suffix := "_" + hex.EncodeToString(b[:])
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		default:
			return '_'
		}
	}, testName)
	if room := 63 - len(prefix) - len(suffix); len(clean) > room {
		clean = clean[:room]
	}
	return prefix + clean + suffix
}
