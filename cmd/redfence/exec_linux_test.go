package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// TestExecKilledTakesCommandAlong checks that on Linux the command dies with
// redfence (Pdeathsig) when redfence itself is killed with SIGKILL, which it
// cannot catch: otherwise the command would run on, no longer extended, and
// next to the next holder once the TTL has passed.
func TestExecKilledTakesCommandAlong(t *testing.T) {
	t.Parallel()
	nodes, _ := newNodes(t, 3)
	dir := t.TempDir()
	// Only the command itself gets the parent-death signal; its background
	// process is in the command's group and lives on (docs/cli.md) until
	// startTrapped's cleanup kills the group.
	p, pid, gc := startTrapped(t, nodes, dir, trapScript(dir, false), "-key", redistest.Key(t), "-quarantine", "0", "-ttl", "2s")

	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait() // killed: no exit status to check
	assert.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond,
		"the command must die with redfence")
	require.False(t, processGone(gc), "the background process is not covered by Pdeathsig (the docs say so)")
}
