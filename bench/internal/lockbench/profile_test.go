package lockbench

import (
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// The runtime's own work counts as such wherever it was entered from; a
// system call at the leaf is I/O unless the scheduler made it; otherwise the
// innermost non-standard package decides.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		want  string
		stack []string // leaf first
	}{
		{"prof io", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.write", "internal/poll.(*FD).Write", "net.(*conn).Write", "bufio.(*Writer).Flush", "github.com/redis/go-redis/v9.(*baseClient)._process", "github.com/redfence/redfence/redlock.(*batcher).send"}},
		{"prof sched", []string{"internal/runtime/syscall/linux.Syscall6", "internal/runtime/syscall/linux.EpollWait", "runtime.netpoll", "runtime.findRunnable", "runtime.schedule"}},
		{"prof sched", []string{"runtime.futex", "runtime.futexwakeup", "runtime.notewakeup", "runtime.startm", "runtime.wakep", "runtime.ready", "github.com/redfence/redfence/internal/quorum.(*Round[...]).Deliver"}},
		{"prof stack", []string{"runtime.pcvalue", "runtime.copystack", "runtime.newstack", "runtime.gopark", "runtime.netpollblock", "github.com/redis/go-redis/v9.(*Client).Process"}},
		{"prof gc", []string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "runtime.newobject", "github.com/redfence/redfence/redlock.newLease"}},
		{"prof client", []string{"runtime.mapaccess1", "github.com/redis/go-redis/v9.(*baseClient).withConn", "github.com/redfence/redfence/redisconn.(*goRedis).Process"}},
		{"prof client", []string{"github.com/redis/rueidis.(*pipe).Do", "github.com/redfence/redfence/rfrueidis.(*conn).Process"}},
		{"prof lib", []string{"context.WithDeadline", "github.com/redfence/redfence/internal/quorum.Begin[...]", "github.com/redfence/redfence/bench/internal/lockbench.runCycles"}},
		{"prof lib", []string{"github.com/go-redsync/redsync/v4.(*Mutex).actOnPoolsAsync.func1"}},
		{"prof lib", []string{"go.opentelemetry.io/otel/trace.(*noopTracer).Start", "github.com/redfence/redfence/redlock.(*Mutex).Lock"}},
		{"prof other", []string{"time.Now", "github.com/redfence/redfence/bench/internal/lockbench.runCycles.func1", "runtime.goexit"}},
		{"prof other", []string{"runtime.nanotime"}},
		{"prof other", nil},
	} {
		if got := classify(c.stack); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.stack, got, c.want)
		}
	}
}

// kindsOf adds each sample's CPU (not its count) to its kind, reading
// inlined frames innermost first.
func TestKindsOf(t *testing.T) {
	fn := func(name string) *profile.Function { return &profile.Function{Name: name} }
	sys, write := fn("internal/runtime/syscall/linux.Syscall6"), fn("internal/poll.(*FD).Write")
	core, goredis := fn("github.com/redfence/redfence/redlock.(*batcher).send"), fn("github.com/redis/go-redis/v9.(*Client).Process")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Value: []int64{1, 10e6}, Location: []*profile.Location{{Line: []profile.Line{{Function: sys}, {Function: write}}}, {Line: []profile.Line{{Function: core}}}}},
			{Value: []int64{2, 20e6}, Location: []*profile.Location{{Line: []profile.Line{{Function: goredis}}}, {Line: []profile.Line{{Function: core}}}}},
			{Value: []int64{3, 30e6}, Location: []*profile.Location{{Line: []profile.Line{{Function: core}}}}},
		},
	}
	got := kindsOf(p)
	want := map[string]float64{"prof io": 10e6, "prof client": 20e6, "prof lib": 30e6}
	if len(got) != len(want) {
		t.Fatalf("kindsOf = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("kindsOf[%s] = %v, want %v", k, got[k], v)
		}
	}
}

// A profile of the process during a measurement sees its goroutines and
// CPU; while another profile runs it measures nothing rather than fail.
func TestProfiler(t *testing.T) {
	p := startProfile()
	// Work until the process has used 200ms of CPU (20 samples at the
	// profile's 100 Hz), bounded in time on a machine without getrusage.
	cpu0, t0 := selfCPU(), time.Now()
	done := make(chan int)
	for range 4 {
		go func() {
			x := 0
			for selfCPU()-cpu0 < 200*time.Millisecond && time.Since(t0) < 5*time.Second {
				for i := range 100_000 {
					x += i % 7
				}
			}
			done <- x
		}()
	}
	for range 4 {
		<-done
	}
	other := startProfile() // the first one still runs
	if k := other.stop(); k != nil {
		t.Errorf("a second profile measured %v", k)
	}
	k := p.stop()
	if k == nil {
		t.Fatal("no profile")
	}
	if k[mGoroutines] < 4 {
		t.Errorf("goroutines started = %v, want at least 4", k[mGoroutines])
	}
	if k["prof other"] <= 0 {
		t.Errorf("no CPU in the profile: %v", k)
	}
	var nilP *profiler
	if nilP.stop() != nil {
		t.Error("a nil profiler measured something")
	}
}
