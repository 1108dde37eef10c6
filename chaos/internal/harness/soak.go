package harness

import (
	"context"
	"io"
	"time"
)

// Defaults of SoakOptions.
const (
	DefaultSoakDuration = 10 * time.Minute
	DefaultSoakWindow   = 5 * time.Second
	DefaultSoakProgress = 10 * time.Second
	DefaultSoakSample   = 2 * time.Second
)

// SoakOptions configures Soak. Zero fields take their defaults.
type SoakOptions struct {
	// Lock is chaos.LockRedlock or chaos.LockSingle.
	Lock string
	// Sentinel runs single over a Sentinel-managed primary with one
	// replica (scenario 15's setup), every client over its own failover
	// client, and adds Sentinel failovers to the faults; safe runs use
	// WithReplicaAcks(1, 300ms) (see chaos's soakPolicy). Only with
	// chaos.LockSingle.
	Sentinel bool
	// Unsafe adds the faults the lock is documented not to tolerate (clock
	// jumps, FLUSHALL, restarts without persistence on single, a disturbed
	// majority for redlock, failovers without replica acknowledgements):
	// double grants are then allowed, fenced-resource violations still are
	// not.
	Unsafe bool
	// Duration is how long the workload runs. The default is
	// DefaultSoakDuration.
	Duration time.Duration
	// Seed seeds the fault schedule and the workload's jitter.
	Seed int64
	// Window is the width of the windows the mutex model is checked over
	// (see chaos's mutexWindows). The default is DefaultSoakWindow.
	Window time.Duration
	// CheckTimeout bounds each window's porcupine check. The default is
	// 10s.
	CheckTimeout time.Duration
	// Progress, if not nil, gets a line every ProgressEvery (default
	// DefaultSoakProgress): operations, faults and violations so far.
	Progress      io.Writer
	ProgressEvery time.Duration
	// SampleEvery is how often goroutines, heap and Redis used_memory are
	// sampled. The default is DefaultSoakSample.
	SampleEvery time.Duration
	// ArtifactsDir, if set, is where a run with a violation saves its
	// history, the timelines of its failing windows and a summary with the
	// seed. The history is written there as the run goes (a hidden
	// temporary file, removed if the run passes), so that the run keeps
	// none of it in memory.
	ArtifactsDir string
}

// SoakConfig names a soak's configuration: the lock, "+sentinel" for
// single over Sentinel.
func SoakConfig(lock string, sentinel bool) string {
	if sentinel {
		return lock + "+sentinel"
	}
	return lock
}

// SoakFaults names the soak's fault kinds, in the nemesis's order:
// SoakResult.Faults counts faults by these names, and the tables list them
// in this order.
var SoakFaults = []string{"kill", "restart-empty", "pause", "cut", "blackhole", "latency", "reset", "wipe", "clock-jump", "failover"}

// SoakResult is what a Soak measured and found.
type SoakResult struct {
	Lock, Backend string
	// Sentinel: single over Sentinel (SoakOptions.Sentinel).
	Sentinel bool
	Unsafe   bool
	Seed     int64
	Duration time.Duration
	// Ops counts operations in the history; Grants granted acquires.
	Ops, Grants int
	// Faults counts the faults started, by kind; PeakDisturbed is the most
	// nodes disturbed at once.
	Faults        map[string]int
	PeakDisturbed int
	// Promotions counts the changes of primary on Sentinel: the failovers
	// the nemesis asked for and those Sentinel made on its own after a
	// kill or a pause of the primary.
	Promotions int
	// DoubleGrants is len(Overlaps); FencedViolations len(FencedViolations);
	// TokenProblems counts repeated tokens and tokens not above an earlier
	// acquire's (TokenExample describes the first).
	DoubleGrants, FencedViolations, TokenProblems int
	TokenExample                                  string
	// Windows is how many windows of Window the mutex model was checked
	// over, WindowViolations and WindowTimeouts their verdicts.
	Window                                    time.Duration
	Windows, WindowViolations, WindowTimeouts int
	// KeysLeft counts lock keys left a TTL after the run; LostUpdates the
	// unfenced control's lost increments; Overran acquires past their
	// deadline (both reported, not checked).
	KeysLeft, LostUpdates, Overran int
	// P50 and P99 are acquire latencies; Availability the share of 100ms
	// windows with a grant.
	P50, P99     time.Duration
	Availability float64
	// Goroutines and Heap (the live heap, as of the last GC): the floor of
	// the first and the last half of the samples after a warm-up quarter;
	// HeapMax the largest live heap, HeapInuseMax the largest HeapInuse
	// (live and not yet swept); RedisGrowth the most any node's used_memory
	// grew from its first sample, RedisPeak the largest.
	GoroutinesFirst, GoroutinesLast int
	HeapFirst, HeapLast, HeapMax    uint64
	HeapInuseMax                    uint64
	RedisGrowth, RedisPeak          int64
	Samples                         int
	// Fails lists the checks that failed; Pass is len(Fails) == 0.
	Fails []string
	Pass  bool
	// Artifacts is where the run's history and timelines were saved, if
	// it failed and SoakOptions.ArtifactsDir was set.
	Artifacts string
}

// Mode returns "safe" or "unsafe".
func (res SoakResult) Mode() string {
	if res.Unsafe {
		return "unsafe"
	}
	return "safe"
}

// Backend is the part of chaos.Backend that harness can name: Soak's
// backend must be a chaos.Backend.
type Backend interface {
	Name() string
	Close() error
}

// Soak runs the lock's workload with four clients for opts.Duration while
// a seeded nemesis mixes every fault the harness has within the lock's
// tolerance (opts.Unsafe goes beyond it), and checks the history as it
// grows (nothing of it stays in memory), then goroutines, heap and Redis
// memory. It returns an error only when the run could not be carried out
// (one wrapping chaos.ErrInvalidScenario for bad options or a backend that
// is not a chaos.Backend); violations are in the result (Pass, Fails).
//
// Package chaos sets Soak when it is initialised: the soak shares Run's
// unexported machinery, and chaos imports harness. It is nil in a program
// that does not import chaos.
var Soak func(ctx context.Context, backend Backend, opts SoakOptions) (SoakResult, error)
