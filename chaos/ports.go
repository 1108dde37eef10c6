package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports for listeners that are closed and bound again later (a cut proxy, a
// killed redis-server) come from outside the kernel's ephemeral port range:
// a port from inside it can be taken, while it is free, by any outgoing
// connection or port-0 listener on the machine, and then the rebind fails.
// Ports in use by this process are remembered so two of its listeners never
// share one.
var stablePorts = struct {
	sync.Mutex
	used map[int]bool
}{used: make(map[int]bool)}

// stablePortAttempts bounds the tries to find and bind a free stable port.
const stablePortAttempts = 20

// stablePortRange returns the ports [lo, hi) to choose from, or lo == hi
// when the ephemeral range leaves no room (ports are then picked by the
// kernel).
var stablePortRange = sync.OnceValues(func() (lo, hi int) {
	// Linux's default; IANA's (BSD, macOS, Windows) starts higher.
	ephLo, ephHi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				ephLo, ephHi = l, h
			}
		}
	}
	const minPorts = 1000
	if lo := max(1024, ephLo-16384); ephLo-lo >= minPorts {
		return lo, ephLo
	}
	if lo := ephHi + 1; 65536-lo >= minPorts {
		return lo, 65536
	}
	return 0, 0
})

// reserveStablePort picks a free 127.0.0.1 port outside the ephemeral range
// and marks it used by this process until releaseStablePort. It returns 0
// (let the kernel pick) when there is no such range.
func reserveStablePort() (int, error) {
	lo, hi := stablePortRange()
	if lo == hi {
		return 0, nil
	}
	stablePorts.Lock()
	defer stablePorts.Unlock()
	for range stablePortAttempts * 5 {
		port := lo + rand.IntN(hi-lo)
		if stablePorts.used[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			continue
		}
		stablePorts.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("chaos: no free loopback port in [%d, %d)", lo, hi)
}

// releaseStablePort forgets a port from reserveStablePort; 0 is ignored.
func releaseStablePort(port int) {
	if port == 0 {
		return
	}
	stablePorts.Lock()
	delete(stablePorts.used, port)
	stablePorts.Unlock()
}
