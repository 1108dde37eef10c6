package fencing

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/redfence/redfence/internal/nilcheck"
)

var (
	//go:embed fence.lua
	fenceSrc    string
	fenceScript = redis.NewScript(fenceSrc)
)

// DefaultRedisKeyPrefix is the key prefix RedisGuard uses unless
// WithRedisKeyPrefix says otherwise.
const DefaultRedisKeyPrefix = "redfence:fence:"

// RedisGuard is a Guard that keeps the highest token per resource in Redis,
// in the key prefix+"{"+resource+"}:fence" (a decimal string, no TTL),
// which shares its Cluster slot with the resource's DataKey keys. Each check
// is one Lua script. A fence that Redis loses (a restart without
// persistence, a failover, eviction, FLUSHALL) lets a stale token through:
// use appendfsync always and maxmemory-policy noeviction where fences
// matter. A RedisGuard is safe for concurrent use. See docs/fencing.md,
// Guards.
type RedisGuard struct {
	client  redis.UniversalClient
	prefix  string
	err     error // a construction error, returned by every method
	metrics *guardMetrics
}

// RedisGuardOption configures NewRedisGuard.
type RedisGuardOption interface {
	applyRedis(*redisConfig)
}

type redisConfig struct {
	prefix string
	mp     metric.MeterProvider
}

type redisOptionFunc func(*redisConfig)

func (f redisOptionFunc) applyRedis(c *redisConfig) { f(c) }

// WithRedisKeyPrefix sets the prefix of every key the guard builds. It must
// not contain '{' or '}', since the guard adds the hash tag itself; a prefix
// that does makes every method return ErrInvalidArgument. The default is
// DefaultRedisKeyPrefix, "redfence:fence:".
func WithRedisKeyPrefix(prefix string) RedisGuardOption {
	return redisOptionFunc(func(c *redisConfig) { c.prefix = prefix })
}

// WithRedisMeterProvider sets where the guard's check counter (MetricChecks)
// goes. The default is the global OpenTelemetry MeterProvider.
func WithRedisMeterProvider(mp metric.MeterProvider) RedisGuardOption {
	return redisOptionFunc(func(c *redisConfig) { c.mp = mp })
}

// NewRedisGuard returns a RedisGuard that stores fences through client, which
// may be a single-node, Sentinel-backed or Cluster client. It cannot fail:
// a nil client or an invalid option makes every method of the returned guard
// return an error wrapping ErrInvalidArgument instead.
func NewRedisGuard(client redis.UniversalClient, opts ...RedisGuardOption) *RedisGuard {
	cfg := redisConfig{prefix: DefaultRedisKeyPrefix}
	for _, o := range opts {
		if o != nil {
			o.applyRedis(&cfg)
		}
	}
	g := &RedisGuard{client: client, prefix: cfg.prefix, metrics: defaultGuardMetrics("redis")}
	if cfg.mp != nil {
		g.metrics = newGuardMetrics(cfg.mp, "redis")
	}
	switch {
	case nilcheck.IsNil(client):
		g.err = invalid("client", "NewRedisGuard was given a nil redis client")
	case strings.ContainsAny(cfg.prefix, "{}"):
		g.err = invalid("key prefix", "Redis key prefix %q contains a brace; the guard adds the {resource} hash tag itself", cfg.prefix)
	}
	return g
}

// DataKey returns prefix+"{"+resource+"}:"+name: a key for the resource's
// data that shares the fence key's hash tag, and so its Cluster slot, as
// Write requires in Redis Cluster. The name "fence" is taken by the fence
// key itself.
func (g *RedisGuard) DataKey(resource, name string) string {
	if g == nil {
		return DefaultRedisKeyPrefix + "{" + resource + "}:" + name
	}
	return g.prefix + "{" + resource + "}:" + name
}

func (g *RedisGuard) fenceKey(resource string) string {
	return g.prefix + "{" + resource + "}:fence"
}

// Check implements Guard with one script run: it compares t with the fence,
// raises the fence to t when t is higher, and returns a *StaleTokenError when
// t is lower. Errors from Redis are wrapped.
//
// On its own, Check does not protect a write to Redis made afterwards; use
// Write for that.
func (g *RedisGuard) Check(ctx context.Context, resource string, t Token) (err error) {
	if err := g.usable("Check"); err != nil {
		return err
	}
	defer func() { g.metrics.record(ctx, err) }()
	if err := validate(resource, t); err != nil {
		return err
	}
	return g.run(ctx, "check", resource, t, []string{g.fenceKey(resource)})
}

// Write sets dataKey to value, and records t, if and only if t is accepted
// for resource, in one Lua script; a stale token leaves dataKey untouched and
// returns a *StaleTokenError. ttl is dataKey's expiry (0: none), rounded up
// to whole milliseconds; a negative ttl is an error. dataKey is used as
// given: in Redis Cluster, build it with DataKey so that it shares the fence
// key's slot. It must not be a fence key.
func (g *RedisGuard) Write(ctx context.Context, resource string, t Token, dataKey, value string, ttl time.Duration) (err error) {
	if err := g.usable("Write"); err != nil {
		return err
	}
	defer func() { g.metrics.record(ctx, err) }()
	if err := validate(resource, t); err != nil {
		return err
	}
	fence := g.fenceKey(resource)
	switch {
	case dataKey == "":
		return invalid("data key", "empty")
	case dataKey == fence:
		return invalid("data key", "%q is the resource's fence key", dataKey)
	case ttl < 0:
		return invalid("TTL", "negative: %v", ttl)
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return g.run(ctx, "write", resource, t, []string{fence, dataKey}, value, strconv.FormatInt(int64(ms), 10))
}

func (g *RedisGuard) usable(method string) error {
	if g == nil {
		return invalid("guard", "%s on a nil *RedisGuard", method)
	}
	return g.err
}

// run executes the fence script and interprets its reply.
func (g *RedisGuard) run(ctx context.Context, op, resource string, t Token, keys []string, extra ...any) error {
	args := append([]any{t.String()}, extra...)
	reply, err := fenceScript.Run(ctx, g.client, keys, args...).Slice()
	if err != nil {
		return fmt.Errorf("fencing: redis %s for resource %q: %w", op, resource, err)
	}
	if len(reply) != 2 {
		return fmt.Errorf("fencing: redis %s for resource %q: unexpected script reply %v", op, resource, reply)
	}
	ok, okType := reply[0].(int64)
	curStr, curType := reply[1].(string)
	cur, parseErr := strconv.ParseUint(curStr, 10, 64)
	if !okType || !curType || parseErr != nil {
		return fmt.Errorf("fencing: redis %s for resource %q: unexpected script reply %v", op, resource, reply)
	}
	if ok == 1 {
		return nil
	}
	return &StaleTokenError{Resource: resource, Token: t, Current: Token(cur)}
}
