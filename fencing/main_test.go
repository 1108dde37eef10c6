package fencing_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/pgtest"
)

// TestMain checks for leaked goroutines after the tests and after the shared
// PostgreSQL server (if a test started one) is stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
