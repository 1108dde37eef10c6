// Package redisnode runs and controls a single real redis-server process
// listening on the loopback interface.
//
// Start (or StartN) starts a Node, which can then be paused (SIGSTOP),
// resumed (SIGCONT), killed (SIGKILL) and restarted on the same address and
// data directory, as fault-injection tests need. Close kills the process and
// removes its temporary directory. One goroutine per process reaps it, so a
// closed Node leaves none behind, and the child gets SIGKILL when the thread
// that started it exits (Pdeathsig). The package does not import testing, so
// command-line tools can use it; redistest has the test helpers.
package redisnode
