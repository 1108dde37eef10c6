package pgtest

import "syscall"

// sysProcAttr runs the child with cred (nil: as ourselves) and asks the
// kernel to SIGKILL it when its parent goes away. Pdeathsig is tied to the OS
// thread that forked the child; the Go runtime only retires threads whose
// goroutine exited while locked to them, which this package never does. Go
// sets the parent-death signal after switching credentials, so the switch
// does not clear it.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
