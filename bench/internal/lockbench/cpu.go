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

// serverStats is what the redis-server processes at some addresses have
// done so far: their CPU time (user + system, INFO cpu), their time in
// scripts (EVAL and EVALSHA, INFO commandstats), the commands they ran
// (those scripts call included) and the bytes they read (INFO stats).
type serverStats struct {
	cpu, scripts      time.Duration
	commands, inBytes float64
}

func (a serverStats) sub(b serverStats) serverStats {
	return serverStats{a.cpu - b.cpu, a.scripts - b.scripts, a.commands - b.commands, a.inBytes - b.inBytes}
}

// serverCPU returns the serverStats of the nodes at addrs.
func serverCPU(ctx context.Context, addrs []string) (serverStats, error) {
	var st serverStats
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(ctx, "cpu", "commandstats", "stats").Result()
		_ = c.Close()
		if err != nil {
			return serverStats{}, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		d, err := parseServerCPU(info)
		if err != nil {
			return serverStats{}, fmt.Errorf("INFO cpu of %s: %w", a, err)
		}
		st.cpu += d
		st.scripts += parseScriptTime(info)
		st.commands += infoNumber(info, "total_commands_processed")
		st.inBytes += infoNumber(info, "total_net_input_bytes")
	}
	return st, nil
}

// infoNumber returns the numeric field k of an INFO reply, 0 when absent.
func infoNumber(info, k string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if key, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && key == k {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
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
// included) and what the servers did over one measurement.
type cpuMeter struct {
	addrs []string
	self0 time.Duration
	srv0  serverStats
	err   error
}

func startCPU(ctx context.Context, addrs []string) *cpuMeter {
	m := &cpuMeter{addrs: addrs, self0: selfCPU()}
	m.srv0, m.err = serverCPU(ctx, addrs)
	return m
}

// cpuPerCycle is what a cycle cost: the client's CPU, and the servers'
// (serverStats: their CPU, their time in scripts, the commands they ran,
// the bytes they read).
type cpuPerCycle struct {
	client time.Duration
	srv    serverStats
}

// perCycle returns the costs per cycle since startCPU; a figure that could
// not be read is 0.
func (m *cpuMeter) perCycle(ctx context.Context, cycles int) cpuPerCycle {
	if cycles <= 0 {
		return cpuPerCycle{}
	}
	self := selfCPU() - m.self0
	if m.self0 == 0 {
		self = 0 // no getrusage here
	}
	srv, err := serverCPU(ctx, m.addrs)
	d := srv.sub(m.srv0)
	if m.err != nil || err != nil {
		d = serverStats{}
	}
	n := time.Duration(cycles)
	return cpuPerCycle{self / n, serverStats{d.cpu / n, d.scripts / n, d.commands / float64(cycles), d.inBytes / float64(cycles)}}
}
