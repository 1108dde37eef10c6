// Package chaos is a fault-injection harness for Redis locks. It runs Redis
// nodes on a Backend (local processes with ProcessBackend, containers with
// package chaos/docker), injects faults through Node (kill, restart with or
// without data, pause, clock jumps) and Network (partitions, latency,
// resets), drives a lock with a Workload, records a History on one
// monotonic clock, and checks it.
//
// To test your own lock, make it a Locker (Adapt, LockerFunc), run a
// Workload while you inject faults, and check the operations with
// Overlaps, FencedViolations, CheckLinearizable, or NewResult for all of
// them. Scenarios and Run play redfence's own scenarios (docs/chaos.md).
// Importing chaos does not compile the Docker client.
package chaos
