//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// processGroupsSupported reports whether redfence exec can run commands in
// their own process group: not on this platform.
const processGroupsSupported = false

var errNoProcessGroups = errors.New("process groups are not supported on this platform")

func setProcessGroup(*exec.Cmd) {}

func terminateGroup(int) error { return errNoProcessGroups }

func killGroup(int) error { return errNoProcessGroups }

func groupAlive(int) bool { return false }

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
