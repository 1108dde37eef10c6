//go:build !linux

package rig

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
