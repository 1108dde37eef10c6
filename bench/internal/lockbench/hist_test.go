package lockbench

import (
	"math"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if rel := math.Abs(float64(got-c.want)) / float64(c.want); rel > 0.01 {
			t.Errorf("quantile(%v) = %v, want %v within 1%%", c.q, got, c.want)
		}
	}
	if h.max != 10*time.Millisecond {
		t.Errorf("max = %v", h.max)
	}
	for v := uint64(0); v < 1<<20; v += 7 {
		i := bucketOf(v)
		if mid := valueOf(i); bucketOf(mid) != i {
			t.Fatalf("value %d: bucket %d midpoint %d falls in bucket %d", v, i, mid, bucketOf(mid))
		}
	}
	if got := bucketOf(math.MaxInt64); got >= len(h.counts) {
		t.Fatalf("bucket of MaxInt64 = %d, out of %d", got, len(h.counts))
	}
}

func TestJain(t *testing.T) {
	if j := jain([]int{5, 5, 5, 5}); j != 1 {
		t.Errorf("equal shares: %v", j)
	}
	if j := jain([]int{8, 0, 0, 0}); j != 0.25 {
		t.Errorf("one worker: %v", j)
	}
}
