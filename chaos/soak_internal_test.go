package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoakPolicy(t *testing.T) {
	for _, tc := range []struct {
		lock        string
		nodes       int
		unsafe      bool
		max         int
		wipe, clock bool
	}{
		{LockRedlock, 5, false, 2, true, false}, // a minority; wipes only under the quarantine
		{LockSingle, 1, false, 1, false, false},
		{LockRedlock, 5, true, 3, true, true},
		{LockSingle, 1, true, 1, true, true},
	} {
		p := soakPolicy(tc.lock, tc.nodes, tc.unsafe)
		assert.Equal(t, tc.max, p.maxDisturbed, "%s unsafe=%v", tc.lock, tc.unsafe)
		assert.Equal(t, tc.wipe, p.allows(faultWipe), "%s unsafe=%v: wipe", tc.lock, tc.unsafe)
		assert.Equal(t, tc.clock, p.allows(faultClock), "%s unsafe=%v: clock", tc.lock, tc.unsafe)
		for _, k := range []soakFault{faultKill, faultPause, faultCut, faultBlackhole, faultLatency, faultReset} {
			assert.True(t, p.allows(k), "%s unsafe=%v: %s", tc.lock, tc.unsafe, k)
		}
	}
}

// fakeInjector records the faults a nemesis starts and heals, on a clock
// the test moves, and checks at every start, from its own record, that no
// more nodes are disturbed than the policy allows: a node is disturbed
// while a fault on it is not healed, for quarantine+1s after a killed node
// is back or a wipe, and for 2 TTLs after a clock jump.
type fakeInjector struct {
	t       *testing.T
	pol     nemesisPolicy
	q       time.Duration
	now     *time.Time
	open    map[int]int       // unhealed faults by node
	until   map[int]time.Time // end of a node's quarantine or early-expiry period
	started map[soakFault]int
	healed  int
	needed  int
}

func (f *fakeInjector) disturbed() int {
	n := 0
	for node := range 8 {
		if f.open[node] > 0 || f.now.Before(f.until[node]) {
			n++
		}
	}
	return n
}

func (f *fakeInjector) start(p faultPlan) (func() error, error) {
	require.True(f.t, f.pol.allows(p.kind), "fault %s not allowed", p.kind)
	busy := f.open[p.node] > 0 || f.now.Before(f.until[p.node])
	assert.False(f.t, busy, "fault %s on disturbed node %d", p.kind, p.node)
	f.started[p.kind]++
	switch p.kind {
	case faultWipe:
		f.until[p.node] = f.now.Add(f.q + time.Second)
	case faultClock:
		f.until[p.node] = f.now.Add(2 * ScenarioTTL)
	default:
		f.open[p.node]++
		f.needed++
	}
	assert.LessOrEqual(f.t, f.disturbed(), f.pol.maxDisturbed, "at %v after %s", *f.now, p.kind)
	if p.kind == faultWipe || p.kind == faultClock {
		return nil, nil
	}
	return func() error {
		f.open[p.node]--
		f.healed++
		if p.kind == faultKill {
			f.until[p.node] = f.now.Add(f.q + time.Second)
		}
		return nil
	}, nil
}

func TestSoakNemesisLimits(t *testing.T) {
	for _, tc := range []struct {
		lock   string
		nodes  int
		unsafe bool
		q      time.Duration
	}{
		{LockRedlock, 5, false, ScenarioQuarantine},
		{LockSingle, 1, false, 0},
		{LockRedlock, 5, true, ScenarioQuarantine},
		{LockSingle, 1, true, 0},
	} {
		pol := soakPolicy(tc.lock, tc.nodes, tc.unsafe)
		now := time.Unix(0, 0)
		inj := &fakeInjector{t: t, pol: pol, q: tc.q, now: &now, open: map[int]int{}, until: map[int]time.Time{}, started: map[soakFault]int{}}
		nem := newNemesis(pol, 7, tc.nodes, ScenarioClients, tc.q, inj)
		end := now.Add(30 * time.Minute)
		for now.Before(end) {
			wake, err := nem.step(now)
			require.NoError(t, err)
			require.True(t, wake.After(now), "the nemesis must move on")
			now = wake
		}
		require.NoError(t, nem.heal(now, true))
		assert.Equal(t, inj.needed, inj.healed, "%s unsafe=%v: every fault is healed", tc.lock, tc.unsafe)
		_, peak := nem.faultCounts()
		assert.Equal(t, pol.maxDisturbed, peak, "%s unsafe=%v: the nemesis reaches its limit", tc.lock, tc.unsafe)
		for k := range numSoakFaults {
			if pol.allows(k) {
				assert.Positive(t, inj.started[k], "%s unsafe=%v: %s injected", tc.lock, tc.unsafe, k)
			}
		}
	}
}

// Windowing helpers: times in milliseconds.
func wAcq(id int, call, ret, until time.Duration) Op {
	return Op{ID: id, Client: id % 4, Kind: Acquire, Call: call * time.Millisecond, Return: ret * time.Millisecond,
		Status: OK, Token: 0, ValidUntil: until * time.Millisecond, Lease: -1}
}

func wRel(id, lease int, call, ret time.Duration) Op {
	return Op{ID: id, Client: lease % 4, Kind: Release, Call: call * time.Millisecond, Return: ret * time.Millisecond, Status: OK, Lease: lease}
}

func anyViolation(ops []Op, w time.Duration) bool {
	for _, v := range windowVerdicts(mutexWindows(ops, w), 5*time.Second) {
		if v == Violation {
			return true
		}
	}
	return false
}

func TestMutexWindowsAtTheCut(t *testing.T) {
	const w = time.Second
	// A holds across the cut at 1s, B is granted after it while A is valid.
	straddle := []Op{wAcq(0, 900, 950, 1500), wAcq(1, 1100, 1200, 1800)}
	assert.True(t, anyViolation(straddle, w), "an overlap across a cut is found")
	// A releases after the cut, B is granted after the release: fine, but
	// only if A's release is in B's window too.
	released := []Op{wAcq(0, 900, 950, 1900), wRel(1, 0, 1100, 1150), wAcq(2, 1200, 1250, 2000)}
	assert.False(t, anyViolation(released, w), "a release in the next window is kept with its lease")
	// A lease longer than a window reaches every window it spans.
	long := []Op{wAcq(0, 100, 150, 3500), wAcq(1, 3000, 3100, 3200)}
	assert.True(t, anyViolation(long, w), "an overlap two windows after the grant is found")
	assert.Len(t, mutexWindows(long, w), 4)
}

// TestMutexWindowsAgreeWithOverlaps checks, on random histories, that the
// windowed porcupine check finds a violation exactly when the exact sweep
// (Overlaps) finds a double grant, whatever the window width.
func TestMutexWindowsAgreeWithOverlaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var ops []Op
		at := time.Duration(0)
		for id := 0; len(ops) < 12; id++ {
			at += time.Duration(rng.IntN(300)) // ms; leases of 50-400ms, so some overlap
			call, ret := at, at+time.Duration(1+rng.IntN(20))
			a := wAcq(len(ops), call, ret, ret+time.Duration(50+rng.IntN(350)))
			ops = append(ops, a)
			if rng.IntN(2) == 0 {
				rc := ret + time.Duration(rng.IntN(500))
				ops = append(ops, wRel(len(ops), a.ID, rc, rc+time.Duration(1+rng.IntN(10))))
			}
		}
		want := len(Overlaps(ops)) > 0
		for _, w := range []time.Duration{50 * time.Millisecond, 333 * time.Millisecond, time.Second} {
			assert.Equal(t, want, anyViolation(ops, w), "history %d, window %v", i, w)
		}
	}
}

func TestGoroutineAndRedisGrowth(t *testing.T) {
	smp := func(g ...int) []soakSample {
		var out []soakSample
		for i, x := range g {
			out = append(out, soakSample{goroutines: x, redis: map[string]int64{"n0": int64(1000 + 10*i), "n1": int64(5000 - i)}})
		}
		return out
	}
	_, _, ok := goroutineGrowth(smp(1, 2, 3, 4, 5, 6, 7))
	assert.False(t, ok, "too few samples")
	first, last, ok := goroutineGrowth(smp(10, 20, 50, 90, 52, 51, 120, 53))
	assert.True(t, ok)
	assert.Equal(t, []int{50, 51}, []int{first, last}, "the floors after the warm-up, not the peaks")
	growth, peak := redisGrowth(smp(1, 1, 1, 1))
	assert.Equal(t, int64(30), growth)
	assert.Equal(t, int64(5000), peak)
}
