package redlock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/locktest"
)

// Fencing across lost writes on five nodes (docs/fencing.md, The proof), in
// internal/locktest/lostwrites.go: B acquires after A, and the nodes A's and
// B's majorities share forgot A's token in between. B's token must be above
// A's. Each case runs twice: with the clock floor, and with it off
// (counter-only tokens), which must show the repeated or lower token under
// the same steps.

// Only node 2 is in both A's majority {0,1,2} and B's {2,3,4}; it restarts
// empty while A holds the lock. Without the quarantine B is granted the lock
// too (the documented unsafe case), but its token is above A's.
func TestFencingSharedNodeRestartedEmpty(t *testing.T) {
	locktest.FencingSharedNodeRestartedEmpty(t, kind(5))
}

// Every node restarts empty between A and B.
func TestFencingAllNodesRestartedEmpty(t *testing.T) {
	locktest.FencingAllNodesRestartedEmpty(t, kind(5))
}

// The fence hash on the shared node is deleted, or expires, between A's
// release and B's acquisition.
func TestFencingSharedFenceKeyLost(t *testing.T) { locktest.FencingSharedFenceKeyLost(t, kind(5)) }

// Each fence write sets the retention as the fence hash's TTL, on every
// node that acknowledged.
func TestFenceRetention(t *testing.T) { locktest.FenceRetention(t, kind(5)) }

// Upgrading from counter-only tokens: counters left by an earlier version on
// every node are followed by a token above them.
func TestFencingUpgradeFromCounters(t *testing.T) { locktest.FencingUpgradeFromCounters(t, kind(5)) }
