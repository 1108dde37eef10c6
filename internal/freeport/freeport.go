// Package freeport picks free loopback TCP ports for the servers that the
// test rigs start (redis-server, postgres).
package freeport

import (
	"fmt"
	"net"
)

// Pick asks the kernel for a free loopback port. Another process may take it
// before the server binds it: callers retry in that case.
func Pick() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	if !ok || addr.Port == 0 {
		return 0, fmt.Errorf("picking a free port: unexpected listener address %v", l.Addr())
	}
	return addr.Port, nil
}
