// Package redisnode runs and controls a single real redis-server process
// listening on the loopback interface.
//
// A Node is started with Start (or several with StartN) and can then be
// paused (SIGSTOP), resumed (SIGCONT), killed (SIGKILL) and restarted on the
// same address and data directory, which is what fault-injection tests need
// to simulate slow, partitioned and crashed Redis instances. Close kills the
// process and removes the temporary data directory Start created.
//
// The package deliberately does not depend on package testing so that
// command-line tools can use it too; see package redistest for test helpers.
//
// Every process is reaped by exactly one goroutine, started with the process
// and ending when the process ends, so a closed Node leaves no goroutines
// behind. On Linux the child is also sent SIGKILL when the thread that started
// it exits (Pdeathsig), so nodes do not outlive a crashed test binary.
package redisnode
