package chaos

import (
	"context"
	"errors"
	"runtime"
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
	heap       uint64           // runtime.MemStats.HeapInuse
	redis      map[string]int64 // used_memory by node name; nodes that did not answer are missing
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
		smp := soakSample{goroutines: runtime.NumGoroutine(), heap: ms.HeapInuse, redis: map[string]int64{}}
		for i, c := range s.clients {
			if v, ok := usedMemory(ctx, c); ok {
				smp.redis[s.nodes[i].Name()] = v
			}
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

// goroutineGrowth compares the fewest goroutines of the last half of the
// samples after the warm-up (the first quarter, while connection pools and
// proxies fill) with the fewest of the first half: a leak raises the floor,
// while a burst of faults only raises peaks. ok is false with fewer than 8
// samples.
func goroutineGrowth(smp []soakSample) (first, last int, ok bool) {
	if len(smp) < 8 {
		return 0, 0, false
	}
	smp = smp[len(smp)/4:]
	floor := func(s []soakSample) int {
		m := s[0].goroutines
		for _, x := range s {
			m = min(m, x.goroutines)
		}
		return m
	}
	return floor(smp[:len(smp)/2]), floor(smp[len(smp)/2:]), true
}

// redisGrowth returns, over every node, the most its used_memory grew from
// its first sample, and the largest used_memory seen.
func redisGrowth(smp []soakSample) (growth, peak int64) {
	first := map[string]int64{}
	for _, s := range smp {
		for n, v := range s.redis {
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
