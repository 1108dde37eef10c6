//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// TestExecGraceThenKillsGroup checks the SIGKILL to the command's whole
// process group once -grace has passed after SIGTERM: a process the command
// started that ignores SIGTERM must not outlive redfence, whether the
// command itself exits on SIGTERM or is killed at the end of the grace.
// exec.Cmd's WaitDelay kills the command alone; the group kill is
// redfence's.
func TestExecGraceThenKillsGroup(t *testing.T) {
	t.Parallel()
	nodes, clients := newNodes(t, 3)
	for _, exitOnTerm := range []bool{true, false} {
		name := map[bool]string{true: "command exits on SIGTERM", false: "command ignores SIGTERM"}[exitOnTerm]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			key := redistest.Key(t)
			// The background process ignores SIGTERM (ignored signals stay
			// ignored across exec).
			script := trapScript(dir, exitOnTerm)
			script[2] = `(trap '' TERM; exec sleep 30) &
echo $! > "$1/stubborn"
` + script[2]
			p, pid, _ := startTrapped(t, nodes, dir, script, "-key", key, "-quarantine", "0", "-ttl", "5s", "-grace", "300ms")
			stubborn := readPID(t, filepath.Join(dir, "stubborn"))

			require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
			r := p.wait()
			assert.Equal(t, exitInterrupted, r.code)
			assert.Contains(t, r.stderr, "sending SIGKILL")
			assert.True(t, processGone(pid), "the command must be gone")
			assert.Eventually(t, func() bool { return processGone(stubborn) }, 5*time.Second, 10*time.Millisecond,
				"the process that ignores SIGTERM must be killed with the group")
			assertKeyGone(t, clients, key)
		})
	}
}
