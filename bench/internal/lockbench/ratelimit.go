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
	NameRLGCRA     = "redfence ratelimit, GCRA"
	NameRLFixed    = "redfence ratelimit, fixed window"
	NameRedisRate  = "go-redis/redis_rate v10, GCRA"
	rateLimitRate  = math.MaxInt32 // never refuses: every call takes the admitting path, which writes
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
	sec, err := b.uncontended(ctx, "s6", libs, b.one, []pair{{NameRLGCRA, NameRedisRate}})
	if err != nil {
		return nil, err
	}
	sec.Title = "6. Rate limiting: GCRA, 1 node (ratelimit vs go-redis/redis_rate)"
	return sec, nil
}

// --- redfence ratelimit ---

type rlImpl struct {
	client *redis.Client
	l      *ratelimit.Limiter
}

func rateLimitLib(name string, alg ratelimit.Algorithm) lib {
	return lib{name: name, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		if len(addrs) != 1 {
			return nil, fmt.Errorf("ratelimit needs 1 node, got %d", len(addrs))
		}
		cl := redis.NewClient(ClientOptions(addrs[0], poolSize))
		l, err := ratelimit.New(cl, alg)
		if err != nil {
			_ = cl.Close()
			return nil, err
		}
		return &rlImpl{client: cl, l: l}, nil
	}}
}

func (r *rlImpl) newLocker(key string) (locker, error) { return &rlCaller{l: r.l, key: key}, nil }

func (r *rlImpl) close() error { return r.client.Close() }

var rlLimit = ratelimit.Limit{Rate: rateLimitRate, Burst: rateLimitBurst, Period: time.Second}

// errRefused would mean the limit was reached, which the benchmark's limit
// rules out: it is counted as an error so that a broken run shows.
var errRefused = errors.New("rate limit refused a request")

type rlCaller struct {
	l   *ratelimit.Limiter
	key string
}

func (c *rlCaller) lock(ctx context.Context) error {
	res, err := c.l.Allow(ctx, c.key, rlLimit)
	if err == nil && res.Allowed != 1 {
		err = errRefused
	}
	return err
}

func (c *rlCaller) unlock(context.Context) error { return nil }

// --- go-redis/redis_rate ---

type rrImpl struct {
	client *redis.Client
	l      *redis_rate.Limiter
}

func redisRateLib(name string) lib {
	return lib{name: name, peer: true, build: func(ctx context.Context, addrs []string, poolSize int) (impl, error) {
		if len(addrs) != 1 {
			return nil, fmt.Errorf("redis_rate needs 1 node, got %d", len(addrs))
		}
		cl := redis.NewClient(ClientOptions(addrs[0], poolSize))
		return &rrImpl{client: cl, l: redis_rate.NewLimiter(cl)}, nil
	}}
}

func (r *rrImpl) newLocker(key string) (locker, error) { return &rrCaller{l: r.l, key: key}, nil }

func (r *rrImpl) close() error { return r.client.Close() }

var rrLimit = redis_rate.Limit{Rate: rateLimitRate, Burst: rateLimitBurst, Period: time.Second}

type rrCaller struct {
	l   *redis_rate.Limiter
	key string
}

func (c *rrCaller) lock(ctx context.Context) error {
	res, err := c.l.Allow(ctx, c.key, rrLimit)
	if err == nil && res.Allowed != 1 {
		err = errRefused
	}
	return err
}

func (c *rrCaller) unlock(context.Context) error { return nil }
