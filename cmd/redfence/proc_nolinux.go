//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing here: the parent-death signal is Linux's.
func setDeathSignal(*syscall.SysProcAttr) {}
