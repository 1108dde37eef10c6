package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
			out = append(out, soakSample{goroutines: x, redis: []int64{int64(1000 + 10*i), int64(5000 - i), -1}})
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

// TestHeapVerdict checks the live heap's verdict: the floors after the
// warm-up quarter are compared, so garbage peaks and a large warm-up pass,
// and growth beyond the larger of 8 MiB and half the first floor fails.
func TestHeapVerdict(t *testing.T) {
	const mb = 1 << 20
	smp := func(heaps ...uint64) []soakSample {
		var out []soakSample
		for _, h := range heaps {
			out = append(out, soakSample{heap: h * mb})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		heaps       []uint64
		first, last uint64
		flat        bool
	}{
		{"flat, with peaks and a warm-up", []uint64{90, 90, 20, 60, 21, 20, 70, 22, 20, 80, 21, 25}, 20, 20, true},
		{"small heap, within 8 MiB", []uint64{1, 1, 4, 5, 4, 4, 12, 13, 12, 14, 12, 12}, 4, 12, true},
		{"small heap, beyond 8 MiB", []uint64{1, 1, 4, 5, 4, 4, 13, 14, 13, 14, 13, 13}, 4, 13, false},
		{"large heap, within half", []uint64{1, 1, 40, 41, 40, 44, 55, 58, 55, 60, 56, 55}, 40, 55, true},
		{"large heap, beyond half", []uint64{1, 1, 40, 41, 40, 44, 61, 62, 61, 65, 61, 63}, 40, 61, false},
	} {
		first, last, ok := heapGrowth(smp(tc.heaps...))
		require.True(t, ok, tc.name)
		assert.Equal(t, []uint64{tc.first * mb, tc.last * mb}, []uint64{first, last}, tc.name)
		assert.Equal(t, tc.flat, heapFlat(first, last), tc.name)
	}
	_, _, ok := heapGrowth(smp(1, 2, 3, 4, 5, 6, 7))
	assert.False(t, ok, "too few samples")
}
