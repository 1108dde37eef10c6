//go:build !linux

package redisnode

import "syscall"

// sysProcAttr returns nil: parent-death signals are Linux-only.
func sysProcAttr() *syscall.SysProcAttr { return nil }
