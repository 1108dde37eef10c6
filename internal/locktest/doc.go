// Package locktest is the conformance suite that package redlock and package
// single both run: the same behaviour, asserted on real redis-server
// processes, through one generic interface that both lock types satisfy
// (Run), and, for the tests that need a whole Client (TLS and ACL, fencing
// across lost writes, the restart quarantine), through a Kind that says what
// differs between the two.
package locktest
