package lockbench

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
)

func randDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// cycleResult is one throughput measurement: every worker locks and releases
// its own key in a loop for the duration.
type cycleResult struct {
	cycles  int
	errors  int
	elapsed time.Duration
	p50     time.Duration
	p99     time.Duration
	err     error // first error seen
	// CPU time per cycle of this process (client and harness) and of the
	// nodes' redis-server processes, and the nodes' time in scripts
	// (cpu.go); 0 when unknown.
	cpu cpuPerCycle
}

func (r cycleResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.cycles) / r.elapsed.Seconds()
}

// hists holds one reusable histogram per worker.
type hists []*hist

func (h *hists) get(n int) []*hist {
	for len(*h) < n {
		*h = append(*h, new(hist))
	}
	out := (*h)[:n]
	for _, x := range out {
		*x = hist{}
	}
	return out
}

// goWorkers starts n goroutines that run f(i), i from 0 to n-1, once start
// is called; join returns when all of them have returned.
func goWorkers(n int, f func(i int)) (start, join func()) {
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			f(i)
		}()
	}
	return func() { close(ready) }, wg.Wait
}

// runCycles runs lock+release on each locker in its own goroutine until d has
// passed, and measures each cycle.
func runCycles(ctx context.Context, lockers []locker, d time.Duration, hs *hists) cycleResult {
	n := len(lockers)
	hh := hs.get(n)
	counts := make([]int, n)
	errs := make([]int, n)
	firstErr := make([]error, n)
	var deadline time.Time // set before the workers start
	start, join := goWorkers(n, func(i int) {
		l, h := lockers[i], hh[i]
		for ctx.Err() == nil {
			t0 := time.Now()
			if !t0.Before(deadline) {
				return
			}
			err := l.lock(ctx)
			if err == nil {
				err = l.unlock(ctx)
			}
			if err != nil {
				errs[i]++
				if firstErr[i] == nil {
					firstErr[i] = err
				}
				time.Sleep(time.Millisecond) // no hot loop on a broken setup
				continue
			}
			h.record(time.Since(t0))
			counts[i]++
		}
	})
	t0 := time.Now()
	deadline = t0.Add(d)
	start()
	join()
	res := cycleResult{elapsed: time.Since(t0)}
	var all hist
	for i := range lockers {
		res.cycles += counts[i]
		res.errors += errs[i]
		if res.err == nil {
			res.err = firstErr[i]
		}
		all.merge(hh[i])
	}
	res.p50, res.p99 = all.quantile(0.50), all.quantile(0.99)
	return res
}

// contendedResult is one contention measurement: every worker wants the same
// key, holds it for a moment, releases it and wants it again.
type contendedResult struct {
	grants      int
	failures    int // Lock returned an error before the window closed
	abandoned   int // Lock still waiting when the window closed
	releaseErrs int
	window      time.Duration
	perWorker   []int
	p50, p99    time.Duration
	max         time.Duration // includes waits still unfinished at the end
	hold        time.Duration // mean time a holder actually slept (time.Sleep(hold) oversleeps)
	retries     int64         // retry delays drawn (retries.go); 0 when not counted
	err         error
}

func (r contendedResult) retriesPerGrant() float64 {
	if r.grants == 0 {
		return 0
	}
	return float64(r.retries) / float64(r.grants)
}

// retriesOf returns l's retry count so far, 0 when it is not counted.
func retriesOf(l lib) int64 {
	if l.retries == nil {
		return 0
	}
	return l.retries.Load()
}

func (r contendedResult) rate() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.grants) / r.window.Seconds()
}

// jain returns Jain's fairness index of the per-worker grants: 1 when all
// workers got the same number, 1/n when one got everything.
func jain(x []int) float64 {
	var s, s2 float64
	for _, v := range x {
		s += float64(v)
		s2 += float64(v) * float64(v)
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

// runContended runs the contention loop for d. Each acquisition is bounded by
// bound (a Lock that has not succeeded by then is a failure); hold is how long
// the holder keeps the lock.
func runContended(ctx context.Context, lockers []locker, d, hold, bound time.Duration, hs *hists) contendedResult {
	n := len(lockers)
	hh := hs.get(n)
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	res := contendedResult{perWorker: make([]int, n)}
	fails := make([]int, n)
	aband := make([]int, n)
	relErrs := make([]int, n)
	maxOpen := make([]time.Duration, n)
	held := make([]time.Duration, n)
	firstErr := make([]error, n)
	start, join := goWorkers(n, func(i int) {
		l, h := lockers[i], hh[i]
		for stop.Err() == nil {
			want := time.Now()
			actx, acancel := context.WithTimeout(stop, bound)
			err := l.lock(actx)
			acancel()
			wait := time.Since(want)
			if err != nil {
				if stop.Err() != nil {
					aband[i]++
					maxOpen[i] = max(maxOpen[i], wait)
					return
				}
				fails[i]++
				if firstErr[i] == nil {
					firstErr[i] = err
				}
				continue
			}
			res.perWorker[i]++
			h.record(wait)
			slept := time.Now()
			time.Sleep(hold)
			held[i] += time.Since(slept)
			// Release on a context the window's end does not cancel.
			if err := l.unlock(context.WithoutCancel(ctx)); err != nil {
				relErrs[i]++
				if firstErr[i] == nil {
					firstErr[i] = err
				}
			}
		}
	})
	t0 := time.Now()
	start()
	timer := time.AfterFunc(d, cancel)
	defer timer.Stop()
	<-stop.Done()
	res.window = time.Since(t0)
	join()
	var all hist
	var heldAll time.Duration
	for i := range lockers {
		heldAll += held[i]
		res.grants += res.perWorker[i]
		res.failures += fails[i]
		res.abandoned += aband[i]
		res.releaseErrs += relErrs[i]
		res.max = max(res.max, maxOpen[i])
		if res.err == nil {
			res.err = firstErr[i]
		}
		all.merge(hh[i])
	}
	res.p50, res.p99 = all.quantile(0.50), all.quantile(0.99)
	res.max = max(res.max, all.max)
	if res.grants > 0 {
		res.hold = heldAll / time.Duration(res.grants)
	}
	return res
}

// allocResult is the heap cost of one lock+release cycle on one goroutine.
type allocResult struct {
	allocs float64 // heap objects per cycle
	bytes  float64 // heap bytes per cycle
	errors int
	err    error
}

// runAllocs measures runtime.MemStats deltas over n sequential cycles, after
// n/10 unmeasured ones. The figures include everything the process allocated
// meanwhile (go-redis, goroutines the library starts), which is the point.
func runAllocs(ctx context.Context, l locker, n int) allocResult {
	var res allocResult
	cycle := func() {
		err := l.lock(ctx)
		if err == nil {
			err = l.unlock(ctx)
		}
		if err != nil {
			res.errors++
			if res.err == nil {
				res.err = err
			}
		}
	}
	for i := 0; i < max(n/10, 1); i++ {
		cycle()
	}
	res.errors, res.err = 0, nil
	runtime.GC()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for i := 0; i < n; i++ {
		cycle()
	}
	runtime.ReadMemStats(&b)
	res.allocs = float64(b.Mallocs-a.Mallocs) / float64(n)
	res.bytes = float64(b.TotalAlloc-a.TotalAlloc) / float64(n)
	return res
}
