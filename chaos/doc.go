// Package chaos is a fault-injection harness for Redis locks: it runs Redis
// nodes on a backend (local redis-server processes here; Docker containers in
// package chaos/docker), injects faults (kill, restart with or without data,
// pause, network partitions, latency, blackholes and connection resets per
// client and node, clock jumps on one node), drives a lock workload against a
// fenced resource and an unfenced control, records a history of every
// operation on one monotonic clock, and checks it: overlapping holders,
// fenced-resource violations, lost updates, and linearizability against
// lease-mutex and fenced-register models (porcupine).
//
// It is redfence's own proof, and a tool for users to test their own locks:
// any lock that fits the Locker interface can be driven.
//
// Importing chaos does not compile the Docker client; package chaos/docker
// does.
package chaos
