package pgtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
