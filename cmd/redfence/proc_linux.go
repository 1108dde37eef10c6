package main

import "syscall"

// setDeathSignal makes the kernel send SIGKILL to the command when redfence
// dies, even by SIGKILL (prctl PR_SET_PDEATHSIG): a command that outlived
// redfence would run on without its lock once the TTL has passed. Only the
// command itself gets it, not the processes it started. The signal follows
// the death of the thread that started the command; Go ends a thread only
// when a goroutine locked to it exits, which exec never does.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
