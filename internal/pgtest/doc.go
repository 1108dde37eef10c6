// Package pgtest runs a real PostgreSQL server for tests and hands each test
// a fresh, empty database on it.
//
// One server is started per test binary, lazily, by the first call to DB: it
// lives in a temporary directory, listens on 127.0.0.1 only (on a free port,
// no Unix socket), trusts every local connection, and runs with fsync off, so
// it is fast and its data does not survive it. Each call to DB creates a new
// database with a unique name and drops it when the test ends.
//
// The server is stopped, and its directory removed, by Main, which the test
// binary's TestMain must call (directly, or through Wrap for goleak):
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(pgtest.Wrap(m))
//	}
//
// DB fails the test if Main is not running, so a server can never outlive a
// test binary that ends normally. If the binary is killed instead (a panic, a
// -timeout), the kernel kills the server with it (Linux parent-death signal);
// only its temporary directory is left behind.
//
// The binaries come from $REDFENCE_POSTGRES_BINDIR when set, else from the
// newest /usr/lib/postgresql/<version>/bin (Debian and Ubuntu), else from
// initdb on PATH. A missing PostgreSQL is a test failure, never a skip: run
// scripts/ensure-postgres.sh. PostgreSQL refuses to run as root, so when the
// tests run as root the server runs as the "postgres" user that the Debian
// package creates.
package pgtest
