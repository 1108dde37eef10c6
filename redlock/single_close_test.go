package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// TestVouchAndCheckNodesNilContextAndClosed: Vouch and CheckNodes answer a
// nil context with a *ConfigError, and a closed Client with ErrClosed
// (locktest.VouchAndCheckNodesNilContextAndClosed).
func TestSingleVouchAndCheckNodesNilContextAndClosed(t *testing.T) {
	locktest.VouchAndCheckNodesNilContextAndClosed(t, singleKind)
}
