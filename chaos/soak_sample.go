package chaos

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// soakSample is one sample of the process and the nodes during a soak.
type soakSample struct {
	goroutines int
	heap       uint64  // the live heap: bytes marked live by the last GC (/gc/heap/live:bytes)
	heapInuse  uint64  // runtime.MemStats.HeapInuse, live and garbage not yet swept
	redis      []int64 // used_memory by node, in sampler.nodes order; -1 if it did not answer
}

// sampler samples goroutines, heap and every node's used_memory.
type sampler struct {
	nodes   []Node
	clients []*redis.Client // direct, not through the proxies

	mu  sync.Mutex
	got []soakSample // guarded by mu
}

func newSampler(nodes []Node) *sampler {
	s := &sampler{nodes: nodes}
	for _, n := range nodes {
		s.clients = append(s.clients, newRedisClient(n.Addr()))
	}
	return s
}

// run samples every d until ctx ends.
func (s *sampler) run(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		smp := soakSample{goroutines: runtime.NumGoroutine(), heap: live[0].Value.Uint64(), heapInuse: ms.HeapInuse,
			redis: make([]int64, len(s.clients))}
		for i, c := range s.clients {
			v, ok := usedMemory(ctx, c)
			if !ok {
				v = -1
			}
			smp.redis[i] = v
		}
		s.mu.Lock()
		s.got = append(s.got, smp)
		s.mu.Unlock()
	}
}

func (s *sampler) samples() []soakSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *sampler) close() error {
	var errs []error
	for _, c := range s.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// usedMemory reads used_memory from INFO memory; false when the node did
// not answer (killed, paused).
func usedMemory(ctx context.Context, c *redis.Client) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// floors compares the smallest value of the last half of the samples after
// the warm-up (the first quarter, while connection pools and proxies fill)
// with the smallest of the first half: a leak raises the floor, while a
// burst of faults or of garbage only raises peaks. ok is false with fewer
// than 8 samples.
func floors[T int | uint64](smp []soakSample, of func(soakSample) T) (first, last T, ok bool) {
	if len(smp) < 8 {
		return 0, 0, false
	}
	smp = smp[len(smp)/4:]
	floor := func(s []soakSample) T {
		m := of(s[0])
		for _, x := range s {
			m = min(m, of(x))
		}
		return m
	}
	return floor(smp[:len(smp)/2]), floor(smp[len(smp)/2:]), true
}

// goroutineGrowth is floors of the goroutine counts.
func goroutineGrowth(smp []soakSample) (first, last int, ok bool) {
	return floors(smp, func(s soakSample) int { return s.goroutines })
}

// heapGrowth is floors of the live heap.
func heapGrowth(smp []soakSample) (first, last uint64, ok bool) {
	return floors(smp, func(s soakSample) uint64 { return s.heap })
}

// redisGrowth returns, over every node, the most its used_memory grew from
// its first answer, and the largest used_memory seen.
func redisGrowth(smp []soakSample) (growth, peak int64) {
	first := map[int]int64{}
	for _, s := range smp {
		for n, v := range s.redis {
			if v < 0 {
				continue
			}
			f, ok := first[n]
			if !ok {
				first[n], f = v, v
			}
			growth = max(growth, v-f)
			peak = max(peak, v)
		}
	}
	return growth, peak
}
