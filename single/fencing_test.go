package single_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// TestFencingTokens: tokens on one node (locktest.FencingTokens).
func TestFencingTokens(t *testing.T) { locktest.FencingTokens(t, kind) }
