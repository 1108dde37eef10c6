// Package chaos is a fault-injection harness for Redis locks. It runs
// Redis nodes on a Backend (local redis-server processes with
// ProcessBackend, containers with package chaos/docker), injects faults
// (through Node: kill, restart with or without data, pause, clock jumps;
// through Network: partitions, latency, blackholes and connection resets
// per client and node), drives a lock against a fenced resource and an
// unfenced control with a Workload, records every operation in a History
// on one monotonic clock, and checks the history.
//
// To test your own lock, make it a Locker (Adapt for a TryLock method,
// LockerFunc for any function), run a Workload over nodes from a Backend
// while you inject faults, and check the operations: Overlaps finds double
// grants, FencedViolations a fenced resource's mistakes, CheckLinearizable
// checks the lease-mutex and fenced-register models, and NewResult does
// all of it at once. WriteArtifacts saves a failing history with its
// timelines.
//
// Scenarios and Run play redfence's own fault scenarios (docs/chaos.md)
// against its redlock and single locks, each checking the outcome it
// expects; the redfence-chaos command runs them, and the soak.
//
// Importing chaos does not compile the Docker client; package chaos/docker
// does.
package chaos
