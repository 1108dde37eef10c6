//go:build unix

package lockbench

import (
	"syscall"
	"testing"
	"time"
)

// schedSample is what BenchmarkCycle reports per cycle beside time and
// allocations: the process's CPU, the times one of its threads blocked
// (voluntary context switches: futex, epoll) and the goroutines it started.
type schedSample struct {
	cpu        time.Duration
	nvcsw      int64
	goroutines uint64
}

func takeSched() schedSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return schedSample{
		cpu:        time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		nvcsw:      ru.Nvcsw,
		goroutines: goroutinesCreated(),
	}
}

// reportSched reports the per-cycle differences since start.
func reportSched(b *testing.B, start schedSample) {
	end := takeSched()
	n := float64(b.N)
	b.ReportMetric(float64(end.cpu-start.cpu)/float64(time.Microsecond)/n, "cpu-µs/op")
	b.ReportMetric(float64(end.nvcsw-start.nvcsw)/n, "csw/op")
	b.ReportMetric(float64(end.goroutines-start.goroutines)/n, "goroutines/op")
}
