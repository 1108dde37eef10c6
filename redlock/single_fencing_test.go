package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// TestFencingTokens: tokens on one node (locktest.FencingTokens).
func TestSingleFencingTokens(t *testing.T) { locktest.FencingTokens(t, singleKind) }
