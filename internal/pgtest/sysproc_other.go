//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs the child with cred (nil: as ourselves). Without Linux's
// parent-death signal a killed test binary can leave the server running.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
