// Package pgtest runs a real PostgreSQL server for tests and hands each test
// a fresh, empty database on it (DB), dropped when the test ends.
//
// One server per test binary starts on the first DB call: in a temporary
// directory, on a free 127.0.0.1 port, trusting local connections, fsync
// off. TestMain must call Main, directly or through Wrap:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(pgtest.Wrap(m))
//	}
//
// Main stops the server; a killed binary takes it along (parent-death
// signal). Binaries come from $REDFENCE_POSTGRES_BINDIR, else the newest
// /usr/lib/postgresql/<version>/bin, else PATH; as root the server runs as
// "postgres". A missing PostgreSQL fails the test (scripts/ensure-postgres.sh).
package pgtest
