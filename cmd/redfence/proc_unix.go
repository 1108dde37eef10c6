//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// processGroupsSupported reports whether redfence exec can run commands in
// their own process group.
const processGroupsSupported = true

// setProcessGroup makes cmd start in a new process group whose id is its
// pid, so that signals sent to the group also reach the processes it
// starts; on Linux the command also gets SIGKILL when redfence dies
// (setDeathSignal).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// terminateGroup sends SIGTERM to the process group pgid, then SIGCONT so
// that a stopped process (Ctrl-Z, SIGTTIN) acts on it.
func terminateGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	return err
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }

// groupAlive reports whether the process group pgid still has a member.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// exitStatus returns a finished process's exit code, or 128+N when signal
// N killed it (the shells' convention).
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
