package lockbench

import (
	"bytes"
	"runtime/metrics"
	"runtime/pprof"
	"strings"

	"github.com/google/pprof/profile"
)

// Where a one-worker cycle's client CPU goes, measured in the run itself:
// a CPU profile of this process during every one-worker measurement, its
// samples sorted into the kinds of work below by their stacks, and the
// goroutines the process started. At one worker a cycle's latency is its
// round trips plus the CPU on their path, so this is what explains a p50
// ratio between libraries that make the same round trips.

// cpuKind is one kind of client work; key is its metric in Row.M (ns per
// cycle).
type cpuKind struct{ key, label string }

var cpuKinds = []cpuKind{
	{"prof io", "socket reads and writes (system calls)"},
	{"prof sched", "scheduler: goroutine start and exit, parking, waking, idle polling"},
	{"prof stack", "goroutine stack growth"},
	{"prof gc", "allocation and garbage collection"},
	{"prof client", "Redis client library (go-redis, rueidis)"},
	{"prof lib", "lock library's own code (telemetry calls included)"},
	{"prof other", "benchmark harness, runtime and standard library, other"},
}

// mGoroutines is the goroutines the process started per cycle.
const mGoroutines = "goroutines"

// Function names (or their prefixes) that put a sample in a kind, checked in
// the order of classify.
var (
	stackFuncs = []string{"runtime.newstack", "runtime.morestack", "runtime.copystack"}
	schedFuncs = []string{
		"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.mcall",
		"runtime.gopark", "runtime.goready", "runtime.ready", "runtime.wakep", "runtime.startm",
		"runtime.stopm", "runtime.notewakeup", "runtime.notesleep", "runtime.netpoll",
		"runtime.newproc", "runtime.goexit0", "runtime.gdestroy", "runtime.mstart",
	}
	gcFuncs = []string{
		"runtime.mallocgc", "runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep",
		"runtime.bgscavenge", "runtime.gcStart", "runtime.markroot", "runtime.gcDrain",
	}
	clientPkgs  = []string{"github.com/redis/go-redis/", "github.com/redis/rueidis"}
	harnessPkgs = []string{"github.com/redfence/redfence/bench/"}
	libPkgs     = []string{
		"github.com/redfence/redfence", "github.com/go-redsync/redsync/", "github.com/bsm/redislock",
		"github.com/go-redis/redis_rate/", "go.opentelemetry.io/",
	}
)

func hasPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// classify returns the kind of a sample from its stack's function names,
// leaf first: the runtime's own work (stack growth, scheduling, GC) wherever
// it was entered from; then a system call at the leaf; then the innermost
// frame of a module that is not the standard library's.
func classify(stack []string) string {
	for _, k := range []struct {
		key   string
		funcs []string
	}{{"prof stack", stackFuncs}, {"prof sched", schedFuncs}, {"prof gc", gcFuncs}} {
		for _, f := range stack {
			if hasPrefix(f, k.funcs) {
				return k.key
			}
		}
	}
	if len(stack) > 0 && (strings.HasPrefix(stack[0], "internal/runtime/syscall") || strings.HasPrefix(stack[0], "syscall.")) {
		return "prof io"
	}
	for _, f := range stack {
		switch {
		case hasPrefix(f, harnessPkgs):
			return "prof other"
		case hasPrefix(f, clientPkgs):
			return "prof client"
		case hasPrefix(f, libPkgs):
			return "prof lib"
		}
	}
	return "prof other"
}

// kindsOf adds up a CPU profile's samples by kind, in nanoseconds.
func kindsOf(p *profile.Profile) map[string]float64 {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	out := make(map[string]float64, len(cpuKinds))
	if vi < 0 {
		return out
	}
	var stack []string
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			for _, ln := range loc.Line { // innermost (inlined) first
				if ln.Function != nil {
					stack = append(stack, ln.Function.Name)
				}
			}
		}
		out[classify(stack)] += float64(s.Value[vi])
	}
	return out
}

// profiler profiles the process over one measurement. Only one CPU profile
// can run at a time: when another is running (lockbench under -cpuprofile),
// it measures nothing.
type profiler struct {
	buf        bytes.Buffer
	on         bool
	goroutines uint64
}

func startProfile() *profiler {
	p := &profiler{goroutines: goroutinesCreated()}
	p.on = pprof.StartCPUProfile(&p.buf) == nil
	return p
}

// stop ends the profile and returns CPU by kind and the goroutines started,
// both as totals over the measurement (nil when nothing was measured, or p
// is nil).
func (p *profiler) stop() map[string]float64 {
	if p == nil || !p.on {
		return nil
	}
	pprof.StopCPUProfile()
	g := goroutinesCreated() - p.goroutines
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		return nil
	}
	out := kindsOf(prof)
	out[mGoroutines] = float64(g)
	return out
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// addKinds adds b's totals to a's (a may be nil) and returns a.
func addKinds(a, b map[string]float64) map[string]float64 {
	if a == nil {
		a = make(map[string]float64, len(b))
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}
