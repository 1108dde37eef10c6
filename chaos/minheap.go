package chaos

import "time"

// minHeap is a min-heap for container/heap of Ts by the time K gives: the
// sweeps of the checkers keep what is still open, or not yet returned, in
// one.
type minHeap[T any, K heapKey[T]] []T

// heapKey is what a minHeap orders its items by.
type heapKey[T any] interface{ key(T) time.Duration }

// endHeap is a min-heap of intervals by End.
type endHeap = minHeap[Interval, byEnd]

// opHeap is a min-heap of operations by Return.
type opHeap = minHeap[Op, byReturn]

type byEnd struct{}

func (byEnd) key(iv Interval) time.Duration { return iv.End }

type byReturn struct{}

func (byReturn) key(op Op) time.Duration { return op.Return }

func (h minHeap[T, K]) Len() int { return len(h) }

func (h minHeap[T, K]) Less(i, j int) bool {
	var k K
	return k.key(h[i]) < k.key(h[j])
}

func (h minHeap[T, K]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *minHeap[T, K]) Push(x any) { *h = append(*h, x.(T)) }

func (h *minHeap[T, K]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
