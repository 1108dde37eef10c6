package lockbench

import (
	"math/bits"
	"time"
)

// hist is a log-linear histogram of durations in nanoseconds: values below
// 256ns are exact, larger ones fall in buckets of 1/128 of their power of two
// (under 0.8% relative error). Recording never allocates. Not safe for
// concurrent use: each worker has its own, merged at the end.
type hist struct {
	counts [58 * subCount]uint64
	n      uint64
	max    time.Duration
}

const (
	subBits  = 7
	subCount = 1 << subBits
)

func bucketOf(v uint64) int {
	n := bits.Len64(v)
	if n <= subBits+1 {
		return int(v)
	}
	shift := n - subBits - 1
	return shift*subCount + int(v>>shift)
}

// valueOf returns the midpoint of bucket i.
func valueOf(i int) uint64 {
	if i < 2*subCount {
		return uint64(i)
	}
	shift := i/subCount - 1
	top := uint64(i - shift*subCount)
	return top<<shift + (uint64(1)<<shift)/2
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q <= 1), or 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(valueOf(i))
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}
