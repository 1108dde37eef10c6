package rig

import "syscall"

// sysProcAttr asks the kernel to SIGKILL the child when the thread that
// started it goes away, so that a killed benchmark leaves no redis-server
// behind. The Go runtime only retires threads whose goroutine exited while
// locked to them, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
