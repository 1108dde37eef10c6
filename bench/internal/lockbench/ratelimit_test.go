package lockbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/bench/internal/rig"
	"github.com/redfence/redfence/ratelimit"
)

// bothLimiters starts one node and returns a context bounded by a minute,
// a client of the node, and ratelimit's GCRA and redis_rate over it; the
// test's cleanup stops them.
func bothLimiters(t *testing.T) (context.Context, *redis.Client, *ratelimit.Limiter, *redis_rate.Limiter) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	nodes, err := rig.StartN(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rig.CloseAll(nodes) })
	rdb := redis.NewClient(ClientOptions(nodes[0].Addr(), 4))
	t.Cleanup(func() { _ = rdb.Close() })
	ours, err := ratelimit.New(rdb, ratelimit.GCRA)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, rdb, ours, redis_rate.NewLimiter(rdb)
}

// TestRateLimitMatchesRedisRate drives redfence's GCRA and redis_rate with
// the same sequence of calls on one node and compares their answers: the
// same admissions and, where both define it the same way, the same
// Remaining, RetryAfter and ResetAfter (within the time the calls take).
// The differences documented in package ratelimit are accounted for:
// RetryAfter 0 instead of -1 when admitted, and Remaining on a refusal.
func TestRateLimitMatchesRedisRate(t *testing.T) {
	ctx, _, ours, theirs := bothLimiters(t)
	const tol = 50 * time.Millisecond // time passing between the two calls
	near := func(a, b time.Duration) bool { return a-b < tol && b-a < tol }

	for _, lim := range []ratelimit.Limit{
		{Rate: 10, Burst: 5, Period: time.Minute}, // one every 6s, 5 at once
		{Rate: 3, Burst: 3, Period: time.Hour},
		{Rate: 100, Burst: 6, Period: 10 * time.Minute},
	} {
		rl := redis_rate.Limit{Rate: lim.Rate, Burst: lim.Burst, Period: lim.Period}
		key := fmt.Sprintf("cmp:%d:%d:%v", lim.Rate, lim.Burst, lim.Period)
		admitted, refused := 0, 0
		for i, n := range []int{1, 2, 1, 3, 1, 1, 2, 0, 1} {
			if n > lim.Burst {
				continue
			}
			a, err := ours.AllowN(ctx, key, lim, n)
			if err != nil {
				t.Fatal(err)
			}
			b, err := theirs.AllowN(ctx, key, rl, n)
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("%v call %d (n=%d): ours %+v, redis_rate %+v", lim, i, n, a, *b)
			if a.Allowed != b.Allowed {
				t.Errorf("%s: Allowed differs", where)
				continue
			}
			switch {
			case a.Allowed > 0:
				admitted++
			case n > 0:
				refused++
			}
			if b.Allowed > 0 || n == 0 {
				if a.Remaining != b.Remaining || a.RetryAfter != 0 || b.RetryAfter != -1 {
					t.Errorf("%s: Remaining or RetryAfter differs", where)
				}
			} else if !near(a.RetryAfter, b.RetryAfter) || a.RetryAfter <= 0 {
				t.Errorf("%s: RetryAfter differs", where)
			}
			if !near(a.ResetAfter, b.ResetAfter) {
				t.Errorf("%s: ResetAfter differs", where)
			}
		}
		if admitted == 0 || refused == 0 {
			t.Errorf("%v: %d admitted, %d refused: the sequence should see both", lim, admitted, refused)
		}
		for i, n := range []int{2, 5, 1} {
			a, err := ours.AllowAtMost(ctx, key+":most", lim, n)
			if err != nil {
				t.Fatal(err)
			}
			b, err := theirs.AllowAtMost(ctx, key+":most", rl, n)
			if err != nil {
				t.Fatal(err)
			}
			if a.Allowed != b.Allowed {
				t.Errorf("%v AllowAtMost call %d (n=%d): ours %+v, redis_rate %+v", lim, i, n, a, *b)
			}
		}
	}
}

// TestRateLimitWorkloadWrites: scenario 6's limit takes both limiters
// down their admitting path, which writes the key, on every call (the
// comparison the report describes).
func TestRateLimitWorkloadWrites(t *testing.T) {
	ctx, rdb, ours, theirs := bothLimiters(t)
	// Each call's SET counted by the server (a key of ours lives about 1ms:
	// looking for it afterwards would race its expiry).
	sets := func() int64 {
		for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_set:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	for i := range 3 {
		for name, allow := range map[string]func() error{
			"ratelimit":  func() error { _, err := ours.Allow(ctx, "ours", rlLimit); return err },
			"redis_rate": func() error { _, err := theirs.Allow(ctx, "theirs", rrLimit); return err },
		} {
			before := sets()
			if err := allow(); err != nil {
				t.Fatal(err)
			}
			if n := sets() - before; n != 1 {
				t.Errorf("call %d of %s: %d SETs, want 1 (the admitting path writes)", i, name, n)
			}
		}
	}
}

// BenchmarkRateLimit is one Allow call per iteration, on one node, for
// redfence's ratelimit (GCRA, fixed and sliding window) and redis_rate;
// the Parallel variant runs 32 goroutines per GOMAXPROCS, each on its own
// key.
func BenchmarkRateLimit(b *testing.B) {
	cases := []struct {
		name string
		lib  lib
	}{
		{"ratelimit-gcra", rateLimitLib(NameRLGCRA, ratelimit.GCRA)},
		{"ratelimit-fixed", rateLimitLib(NameRLFixed, ratelimit.FixedWindow)},
		{"redis_rate", redisRateLib(NameRedisRate)},
	}
	for _, par := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if par {
				name += "-parallel"
			}
			b.Run(name, func(b *testing.B) {
				im := buildCase(b, benchCase{name: c.name, lib: c.lib})
				ctx := context.Background()
				b.ReportAllocs()
				if !par {
					l, _ := im.newLocker("rl:gobench:" + c.name)
					for b.Loop() {
						if err := l.lock(ctx); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				var n atomic.Int64
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					l, _ := im.newLocker(fmt.Sprintf("rl:gobench:par:%s:%d", c.name, n.Add(1)))
					for pb.Next() {
						if err := l.lock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
