package lockbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CPU time per cycle, next to the throughput figures: on a machine where
// the client and the redis-server processes share the cores, what each
// side spends per cycle is what bounds throughput once the workers keep
// them busy, and it shows which side a difference between libraries comes
// from.

// serverCPU returns the CPU time (user + system) the redis-server processes
// at addrs have used so far, from INFO cpu.
func serverCPU(ctx context.Context, addrs []string) (time.Duration, error) {
	var total time.Duration
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(ctx, "cpu").Result()
		_ = c.Close()
		if err != nil {
			return 0, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		d, err := parseServerCPU(info)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		total += d
	}
	return total, nil
}

// parseServerCPU adds used_cpu_user and used_cpu_sys (seconds) of an INFO
// cpu reply.
func parseServerCPU(info string) (time.Duration, error) {
	var total time.Duration
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		total += time.Duration(s * float64(time.Second))
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("no used_cpu_user and used_cpu_sys in %q", info)
	}
	return total, nil
}

// cpuMeter measures the CPU time of the client (this process, harness
// included) and of the servers over one measurement.
type cpuMeter struct {
	addrs       []string
	self0, srv0 time.Duration
	err         error
}

func startCPU(ctx context.Context, addrs []string) *cpuMeter {
	m := &cpuMeter{addrs: addrs, self0: selfCPU()}
	m.srv0, m.err = serverCPU(ctx, addrs)
	return m
}

// perCycle returns the client's and the servers' CPU time per cycle since
// startCPU; both 0 when a figure could not be read.
func (m *cpuMeter) perCycle(ctx context.Context, cycles int) (client, server time.Duration) {
	if cycles <= 0 {
		return 0, 0
	}
	self := selfCPU() - m.self0
	srv, err := serverCPU(ctx, m.addrs)
	if m.err != nil || err != nil {
		srv, m.srv0 = 0, 0
	}
	if m.self0 == 0 {
		self = 0 // no getrusage here
	}
	return self / time.Duration(cycles), (srv - m.srv0) / time.Duration(cycles)
}
