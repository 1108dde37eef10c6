package lockbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/ratelimit"
)

// Scenario s6 measures rate limiting, not locking: redfence's ratelimit GCRA
// against go-redis/redis_rate (the same algorithm), through the throughput
// loop of s1 and s2. A "cycle" is one Allow call (the locker's lock; its
// unlock does nothing), each worker on a key of its own.

// Row labels of s6.
const (
	NameRLGCRA    = "redfence ratelimit, GCRA"
	NameRLFixed   = "redfence ratelimit, fixed window"
	NameRedisRate = "go-redis/redis_rate v10, GCRA"
	// rateLimitRate spaces requests 1µs apart and the burst never runs out:
	// every call is admitted and writes. Not MaxInt32 per second: redis_rate's
	// step of 1/MaxInt32 s vanishes against its TAT (a double of seconds since
	// 2017), so it never wrote (TestRateLimitWorkloadWrites).
	rateLimitRate  = 1_000_000
	rateLimitBurst = math.MaxInt32
)

func init() {
	shortNames[NameRLGCRA] = "ratelimit GCRA"
	shortNames[NameRLFixed] = "ratelimit fixed window"
	shortNames[NameRedisRate] = "redis_rate"
	explanations["s6"] = "Rate limiting rather than locking: each worker calls `Allow` on a key of its own, in a loop, on 1 node; a cycle is one call (one script, one round trip). " +
		"redfence's `ratelimit` GCRA against " + redisRateVersion() + " (`NewLimiter(client)`, `Allow(ctx, key, limit)`), which implements the same algorithm; " +
		"both with a limit of " + fmt.Sprint(rateLimitRate) + " per second, so that every call is admitted and writes the key (the more expensive path of both scripts). " +
		"The fixed-window row, for scale, is `ratelimit` with `FixedWindow` (HMGET, HINCRBY, PEXPIRE). The ratio is ratelimit GCRA / redis_rate."
}

func redisRateVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-redis/redis_rate/v10" {
				return "go-redis/redis_rate " + d.Version
			}
		}
	}
	return "go-redis/redis_rate v10"
}

func (b *runner) s6(ctx context.Context) (*Section, error) {
	libs := []lib{
		rateLimitLib(NameRLGCRA, ratelimit.GCRA),
		rateLimitLib(NameRLFixed, ratelimit.FixedWindow),
		redisRateLib(NameRedisRate),
	}
	return b.uncontended(ctx, "s6", "6. Rate limiting: GCRA, 1 node (ratelimit vs go-redis/redis_rate)", libs, b.one, []pair{{NameRLGCRA, NameRedisRate}})
}

// rateImpl is a rate limiter over one client: allow makes one call for key
// and reports how many requests it admitted.
type rateImpl struct {
	client *redis.Client
	allow  func(ctx context.Context, key string) (allowed int, err error)
}

func (r *rateImpl) newLocker(key string) (locker, error) { return &rateCaller{r.allow, key}, nil }

func (r *rateImpl) close() error { return r.client.Close() }

// errRefused would mean the limit was reached, which the benchmark's limit
// rules out: it is counted as an error so that a broken run shows.
var errRefused = errors.New("rate limit refused a request")

// rateCaller is a locker whose lock is one call of allow for its key; its
// unlock does nothing.
type rateCaller struct {
	allow func(ctx context.Context, key string) (int, error)
	key   string
}

func (c *rateCaller) lock(ctx context.Context) error {
	allowed, err := c.allow(ctx, c.key)
	if err == nil && allowed != 1 {
		err = errRefused
	}
	return err
}

func (c *rateCaller) unlock(context.Context) error { return nil }

// --- redfence ratelimit ---

var rlLimit = ratelimit.Limit{Rate: rateLimitRate, Burst: rateLimitBurst, Period: time.Second}

func rateLimitLib(name string, alg ratelimit.Algorithm) lib {
	return lib{name: name, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cl, err := oneClient("ratelimit", addrs, poolSize)
		if err != nil {
			return nil, err
		}
		l, err := ratelimit.New(cl, alg)
		if err != nil {
			_ = cl.Close()
			return nil, err
		}
		return &rateImpl{client: cl, allow: func(ctx context.Context, key string) (int, error) {
			res, err := l.Allow(ctx, key, rlLimit)
			return res.Allowed, err
		}}, nil
	}}
}

// --- go-redis/redis_rate ---

var rrLimit = redis_rate.Limit{Rate: rateLimitRate, Burst: rateLimitBurst, Period: time.Second}

func redisRateLib(name string) lib {
	return lib{name: name, peer: true, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		cl, err := oneClient("redis_rate", addrs, poolSize)
		if err != nil {
			return nil, err
		}
		l := redis_rate.NewLimiter(cl)
		return &rateImpl{client: cl, allow: func(ctx context.Context, key string) (int, error) {
			res, err := l.Allow(ctx, key, rrLimit)
			if err != nil {
				return 0, err
			}
			return res.Allowed, nil
		}}, nil
	}}
}
