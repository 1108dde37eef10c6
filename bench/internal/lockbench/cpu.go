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
// at addrs have used so far, from INFO cpu, and the time they have spent
// running scripts (EVAL and EVALSHA), from INFO commandstats.
func serverCPU(ctx context.Context, addrs []string) (cpu, scripts time.Duration, err error) {
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(ctx, "cpu", "commandstats").Result()
		_ = c.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		d, err := parseServerCPU(info)
		if err != nil {
			return 0, 0, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		cpu += d
		scripts += parseScriptTime(info)
	}
	return cpu, scripts, nil
}

// parseScriptTime adds the usec of the cmdstat_eval and cmdstat_evalsha
// lines of an INFO commandstats reply: the time spent in scripts, the
// commands they call included (0 when none ran yet).
func parseScriptTime(info string) time.Duration {
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "cmdstat_eval" && k != "cmdstat_evalsha") {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if us, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(us, 10, 64)
				total += time.Duration(n) * time.Microsecond
			}
		}
	}
	return total
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
// included) and of the servers over one measurement, and the servers' time
// in scripts.
type cpuMeter struct {
	addrs             []string
	self0, srv0, scr0 time.Duration
	err               error
}

func startCPU(ctx context.Context, addrs []string) *cpuMeter {
	m := &cpuMeter{addrs: addrs, self0: selfCPU()}
	m.srv0, m.scr0, m.err = serverCPU(ctx, addrs)
	return m
}

// cpuPerCycle is what a cycle cost: the client's CPU, the servers' CPU and,
// of that, the servers' time in scripts.
type cpuPerCycle struct{ client, server, scripts time.Duration }

// perCycle returns the costs per cycle since startCPU; a figure that could
// not be read is 0.
func (m *cpuMeter) perCycle(ctx context.Context, cycles int) cpuPerCycle {
	if cycles <= 0 {
		return cpuPerCycle{}
	}
	self := selfCPU() - m.self0
	srv, scr, err := serverCPU(ctx, m.addrs)
	if m.err != nil || err != nil {
		srv, m.srv0, scr, m.scr0 = 0, 0, 0, 0
	}
	if m.self0 == 0 {
		self = 0 // no getrusage here
	}
	n := time.Duration(cycles)
	return cpuPerCycle{self / n, (srv - m.srv0) / n, (scr - m.scr0) / n}
}
