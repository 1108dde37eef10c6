//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExecGivesUpOnUnreapableCommand: a stopped command whose wait never
// ends (a process in uninterruptible sleep outlives SIGKILL) makes run
// return after the grace and the reap timeout, so that Do can release the
// lease, instead of waiting for ever.
func TestExecGivesUpOnUnreapableCommand(t *testing.T) {
	path, err := exec.LookPath("sleep")
	require.NoError(t, err)
	started, unblock := make(chan struct{}), make(chan struct{})
	// A file, as in the CLI: exec.Cmd hands it to the command rather than
	// copying into it from a goroutine of its own.
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	c := child{
		cfg:    execConfig{argv: []string{"sleep", "30"}, grace: 10 * time.Millisecond},
		path:   path,
		stderr: stderr,
		reap:   50 * time.Millisecond,
		waitFor: func(cmd *exec.Cmd) error {
			close(started)
			<-unblock         // as if the kernel never let the command go
			return cmd.Wait() // reap it at the end of the test
		},
	}
	ctx, cancel := context.WithCancel(t.Context())
	code := make(chan int, 1)
	go func() { code <- c.run(ctx, nil) }()
	<-started
	cancel() // an interrupt: Cancel sends SIGTERM to the group
	select {
	case got := <-code:
		assert.Equal(t, exitInterrupted, got)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not give up on a command it cannot reap")
	}
	close(unblock)
	out, err := os.ReadFile(stderr.Name())
	require.NoError(t, err)
	assert.Contains(t, string(out), "redfence: interrupted; stopping the command")
	assert.Contains(t, string(out), "has not exited 50ms after SIGKILL; giving up waiting for it")
}
