package redisnode

import "syscall"

// sysProcAttr asks the kernel to SIGKILL the child when its parent goes away.
// Pdeathsig is tied to the OS thread that forked the child; the Go runtime
// only retires threads whose goroutine exited while locked to them, which
// this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
