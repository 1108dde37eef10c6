package pgtest_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/pgtest"
)

func queryString(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var s string
	require.NoError(t, db.QueryRowContext(ctx, q, args...).Scan(&s), q)
	return s
}

func TestDBGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	a, b := pgtest.DB(t), pgtest.DB(t)
	nameA := queryString(t, a, "SELECT current_database()")
	nameB := queryString(t, b, "SELECT current_database()")
	assert.NotEqual(t, nameA, nameB)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := a.ExecContext(ctx, "CREATE TABLE only_in_a (x int)")
	require.NoError(t, err)
	assert.Equal(t, "1", queryString(t, a, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"))
	assert.Equal(t, "0", queryString(t, b, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"))
}

func TestServerSettings(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	assert.Equal(t, "127.0.0.1", queryString(t, db, "SHOW listen_addresses"))
	assert.Equal(t, "", queryString(t, db, "SHOW unix_socket_directories"))
	assert.Equal(t, "off", queryString(t, db, "SHOW fsync"))
	assert.Equal(t, "postgres", queryString(t, db, "SELECT current_user"))
	assert.Equal(t, "UTF8", queryString(t, db, "SHOW server_encoding"))
}

func TestDBIsDroppedWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = queryString(t, pgtest.DB(t), "SELECT current_database()")
	})
	require.NotEmpty(t, name)
	observer := pgtest.DB(t)
	assert.Equal(t, "0", queryString(t, observer, "SELECT count(*)::text FROM pg_database WHERE datname = $1", name))
	assert.Equal(t, "1", queryString(t, observer, "SELECT count(*)::text FROM pg_database WHERE datname = current_database()"),
		"the query can see databases that exist")
}

func TestDBParallelConnections(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Hold 20 connections open at once: the server must allow more than a
	// handful per test.
	conns := make([]*sql.Conn, 0, 20)
	for range 20 {
		c, err := db.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		var one int
		require.NoError(t, c.QueryRowContext(ctx, "SELECT 1").Scan(&one))
		assert.Equal(t, 1, one)
		require.NoError(t, c.Close())
	}
}

func TestServerStopsAndRemovesItsDirectory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := pgtest.StartServer(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() }) // no-op after the Stop below

	require.True(t, srv.Running())
	require.DirExists(t, filepath.Join(srv.Dir(), "data"))
	var n int
	require.NoError(t, srv.Admin().QueryRowContext(ctx, "SELECT 40 + 2").Scan(&n))
	assert.Equal(t, 42, n)
	assert.Contains(t, srv.LogTail(), "database system is ready to accept connections")

	require.NoError(t, srv.Stop())
	assert.False(t, srv.Running(), "the postmaster has exited")
	assert.NoDirExists(t, srv.Dir())
	assert.NoError(t, srv.Stop(), "a second Stop returns the first result")

	// Nothing listens on the port any more.
	db, err := sql.Open("pgx", "host=127.0.0.1 port="+strconv.Itoa(srv.Port())+" user=postgres dbname=postgres sslmode=disable connect_timeout=5")
	require.NoError(t, err)
	defer db.Close()
	assert.Error(t, db.PingContext(ctx))
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	mkBin := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	noPath := func(string) (string, error) { return "", errors.New("not on PATH") }

	root := t.TempDir()
	mkBin(t, filepath.Join(root, "9.6", "bin"), "initdb", "postgres")
	mkBin(t, filepath.Join(root, "13", "bin"), "initdb", "postgres")
	mkBin(t, filepath.Join(root, "15", "bin"), "initdb", "postgres")
	mkBin(t, filepath.Join(root, "16", "bin"), "initdb") // incomplete: no postgres
	mkBin(t, filepath.Join(root, "common", "bin"), "initdb", "postgres")
	require.NoError(t, os.WriteFile(filepath.Join(root, "17"), nil, 0o644)) // a file, not a directory

	other := filepath.Join(t.TempDir(), "custom")
	mkBin(t, other, "initdb", "postgres")
	notExec := filepath.Join(t.TempDir(), "noexec")
	require.NoError(t, os.MkdirAll(notExec, 0o755))
	for _, n := range []string{"initdb", "postgres"} {
		require.NoError(t, os.WriteFile(filepath.Join(notExec, n), nil, 0o644))
	}
	onPath := func(name string) (string, error) { return filepath.Join(other, name), nil }

	t.Run("newest complete version wins", func(t *testing.T) {
		dir, err := pgtest.FindBinDir("", root, noPath)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(root, "15", "bin"), dir)
	})
	t.Run("env overrides", func(t *testing.T) {
		dir, err := pgtest.FindBinDir(other, root, noPath)
		require.NoError(t, err)
		assert.Equal(t, other, dir)
	})
	t.Run("bad env is an error, not a fallback", func(t *testing.T) {
		_, err := pgtest.FindBinDir(notExec, root, noPath)
		require.ErrorIs(t, err, pgtest.ErrNotFound)
		assert.Contains(t, err.Error(), pgtest.EnvBinDir+"="+notExec)
	})
	t.Run("PATH fallback", func(t *testing.T) {
		dir, err := pgtest.FindBinDir("", filepath.Join(root, "missing"), onPath)
		require.NoError(t, err)
		assert.Equal(t, other, dir)
	})
	t.Run("nothing found", func(t *testing.T) {
		_, err := pgtest.FindBinDir("", filepath.Join(root, "missing"), noPath)
		require.ErrorIs(t, err, pgtest.ErrNotFound)
		assert.EqualError(t, err, "PostgreSQL not found: run scripts/ensure-postgres.sh or apt-get install postgresql")
	})
}

func TestDBName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^t[0-9]+_[a-z0-9_]*_[0-9a-f]{6}$`)
	a := pgtest.DBName("TestX/sub test:1")
	b := pgtest.DBName("TestX/sub test:1")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, valid, a)
	assert.Contains(t, a, "_testx_sub_test_1_")

	long := pgtest.DBName(strings.Repeat("VeryLongTestName", 10))
	assert.LessOrEqual(t, len(long), 63)
	assert.Regexp(t, valid, long)
}
