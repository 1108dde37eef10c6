// Package locktest is the conformance suite that package redlock and package
// single both run: the same behaviour, asserted on real redis-server
// processes, through one generic interface that both lock types satisfy.
package locktest
