package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redfence/redfence/redlock"
)

// child is the command redfence exec runs under the lock, and where its
// input and output go.
type child struct {
	cfg            execConfig
	path           string // the executable, found with exec.LookPath
	stdin          io.Reader
	stdout, stderr io.Writer
	// reap bounds the wait for a stopped command after its grace (0:
	// reapTimeout); waitFor replaces cmd.Wait in tests. Both for tests.
	reap    time.Duration
	waitFor func(*exec.Cmd) error
}

// reapTimeout bounds the wait for a stopped command once its grace has
// passed and it got SIGKILL: a process in uninterruptible sleep can outlive
// SIGKILL, and the lease must still be released.
const reapTimeout = 5 * time.Second

// runLocked runs the command under the lock with Mutex.Do and returns the
// exit code. Do keeps the lease alive while the command runs, cancels the
// command's context when the lease is lost or ctx ends (a signal), and
// releases the lease when the command is done, on a context detached from
// ctx: an interrupt stops the command but never skips the release.
func (c child) runLocked(ctx context.Context, lk *locker) int {
	status, ran := 0, false
	err := lk.m.Do(ctx, func(cctx context.Context, lease *redlock.Lease) error {
		ran = true
		status = c.run(cctx, lease)
		return nil
	})
	switch {
	case !ran:
		return c.notAcquired(ctx, lk, err)
	case err == nil, status == exitLockLost:
		// A loss was reported when it stopped the command; the release
		// only cleaned up what was left.
	case errors.Is(err, redlock.ErrLost):
		fmt.Fprintf(c.stderr, "redfence: warning: the lock was lost or had expired when the command ended: %s\n", reason(err))
	default:
		fmt.Fprintf(c.stderr, "redfence: warning: releasing the lock: %v (its keys expire within the TTL)\n", err)
	}
	return status
}

// notAcquired explains err, the failed acquire, and returns its exit code.
func (c child) notAcquired(ctx context.Context, lk *locker, err error) int {
	if ctx.Err() != nil {
		fmt.Fprintln(c.stderr, "redfence exec: interrupted while acquiring the lock")
		return exitInterrupted
	}
	code, what := classifyAcquireError(err, len(c.cfg.conn.addrs))
	fmt.Fprintf(c.stderr, "redfence exec: lock %q %s: %v\n", lk.m.Key(), what, err)
	if code == exitUnavailable && errors.Is(err, redlock.ErrQuarantined) {
		fmt.Fprintln(c.stderr, quarantineHint(err))
	}
	return code
}

// run runs the command until it exits or ctx, Do's context, ends. Then
// exec.Cmd's Cancel sends SIGTERM to the command's process group, WaitDelay
// (-grace) later exec.Cmd kills the command itself, and stopGroup kills
// what is left of its group once the grace has passed. It returns the
// command's status, or stopCode's when it was stopped.
func (c child) run(ctx context.Context, lease *redlock.Lease) int {
	if ctx.Err() != nil {
		if lostCause(ctx) {
			fmt.Fprintf(c.stderr, "redfence: lock lost: %s; the command was not started\n", reason(context.Cause(ctx)))
		} else {
			fmt.Fprintln(c.stderr, "redfence exec: interrupted before the command started")
		}
		return stopCode(ctx)
	}
	cmd := exec.CommandContext(ctx, c.path, c.cfg.argv[1:]...)
	cmd.Args[0] = c.cfg.argv[0]
	cmd.Env = append(os.Environ(), envKey+"="+lease.Key(), envToken+"="+strconv.FormatUint(uint64(lease.Token()), 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	setProcessGroup(cmd)
	var stopped time.Time            // when Cancel ran; Wait returns after it
	cancelled := make(chan struct{}) // closed when Cancel is done with stopped and stderr
	cmd.Cancel = func() error {
		defer close(cancelled)
		stopped = time.Now()
		c.announceStop(ctx)
		err := terminateGroup(cmd.Process.Pid)
		if err != nil {
			fmt.Fprintf(c.stderr, "redfence: sending SIGTERM to the command: %v\n", err)
		}
		return err
	}
	// Also bounds the wait for output copying when stdout or stderr is not
	// a file and a leftover process holds the pipe. 0 would mean no bound:
	// -grace 0 kills at once.
	cmd.WaitDelay = max(c.cfg.grace, time.Nanosecond)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.stderr, "redfence exec: starting the command: %v\n", err)
		return exitCannotRun
	}
	reaped, err := c.wait(ctx, cmd)
	if !reaped {
		<-cancelled // Wait has not returned, so nothing else orders Cancel's writes before ours
		fmt.Fprintf(c.stderr, "redfence: the command (pid %d) has not exited %v after SIGKILL; giving up waiting for it\n", cmd.Process.Pid, c.reapAfter())
		_ = killGroup(cmd.Process.Pid)
		return stopCode(ctx)
	}
	if stopped.IsZero() {
		return commandStatus(cmd, err, c.stderr)
	}
	c.stopGroup(cmd.Process.Pid, stopped)
	return stopCode(ctx)
}

// wait waits for the started cmd as cmd.Wait does (which stops it once ctx
// ends: Cancel, then WaitDelay), but once ctx has ended, for no longer than
// the grace plus the reap timeout; reaped is false when it gave up. The
// goroutine that waits then lives on until the command is gone.
func (c child) wait(ctx context.Context, cmd *exec.Cmd) (reaped bool, err error) {
	waitFor := c.waitFor
	if waitFor == nil {
		waitFor = (*exec.Cmd).Wait
	}
	waited := make(chan error, 1)
	go func() { waited <- waitFor(cmd) }()
	select {
	case err = <-waited:
		return true, err
	case <-ctx.Done():
	}
	t := time.NewTimer(c.cfg.grace + c.reapAfter())
	defer t.Stop()
	select {
	case err = <-waited:
		return true, err
	case <-t.C:
		return false, nil
	}
}

func (c child) reapAfter() time.Duration {
	if c.reap > 0 {
		return c.reap
	}
	return reapTimeout
}

// stopCode is the exit code of a command stopped because ctx ended:
// exitLockLost when the lease's end cancelled it (context.Cause), else
// exitInterrupted (a signal).
func stopCode(ctx context.Context) int {
	if lostCause(ctx) {
		return exitLockLost
	}
	return exitInterrupted
}

// lostCause reports whether ctx, Do's context, was cancelled by the end
// of the lease (lost, or the Client closed) rather than by a signal.
func lostCause(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, redlock.ErrLost) || errors.Is(cause, redlock.ErrClosed)
}

// announceStop says why the command is being stopped.
func (c child) announceStop(ctx context.Context) {
	if lostCause(ctx) {
		fmt.Fprintf(c.stderr, "redfence: lock lost: %s; stopping the command\n", reason(context.Cause(ctx)))
		return
	}
	fmt.Fprintf(c.stderr, "redfence: interrupted; stopping the command (SIGTERM, SIGKILL after %v)\n", c.cfg.grace)
}

// stopGroup ends the process group pgid of a command that got SIGTERM at
// stopped and has been waited for: it exited, or WaitDelay ran out and
// exec.Cmd killed it, and it alone. The rest of the group gets what is left
// of the grace, then SIGKILL.
func (c child) stopGroup(pgid int, stopped time.Time) {
	grace := c.cfg.grace
	left := time.Until(stopped.Add(grace))
	if left <= 0 {
		fmt.Fprintf(c.stderr, "redfence: the command did not exit within %v of SIGTERM; sending SIGKILL\n", grace)
		_ = killGroup(pgid) // the command is gone; nothing else of its group may be
		return
	}
	deadline := time.NewTimer(left)
	defer deadline.Stop()
	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	for groupAlive(pgid) {
		select {
		case <-deadline.C:
			fmt.Fprintf(c.stderr, "redfence: processes started by the command still running %v after SIGTERM; sending SIGKILL\n", grace)
			_ = killGroup(pgid)
			return
		case <-tick.C:
		}
	}
}

// commandStatus returns the command's exit code: its exit status, or 128+N
// when signal N killed it.
func commandStatus(cmd *exec.Cmd, waitErr error, stderr io.Writer) int {
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		fmt.Fprintf(stderr, "redfence exec: waiting for the command: %v\n", waitErr)
	}
	if cmd.ProcessState == nil {
		return exitCannotRun
	}
	return exitStatus(cmd.ProcessState)
}

// reason returns err's text without the library's "redfence: " prefix, for
// messages that already start with it.
func reason(err error) string {
	if err == nil {
		return "unknown reason"
	}
	return strings.TrimPrefix(err.Error(), "redfence: ")
}
