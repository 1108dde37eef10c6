package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/enum"
	"github.com/redfence/redfence/internal/nilcheck"
)

// Algorithm selects how a Limiter counts.
type Algorithm int

const (
	// GCRA is the generic cell rate algorithm (a token bucket without a
	// refill timer), as in go-redis/redis_rate: requests are spaced
	// Period/Rate apart on average, with up to Burst at once after a quiet
	// spell. One small string key per limiter key.
	GCRA Algorithm = iota + 1
	// FixedWindow admits Rate requests in each window of Period, windows
	// aligned on multiples of Period of the server's clock. Cheapest, but a
	// client can get 2*Rate requests through in a short span around a window
	// boundary. One small hash per limiter key.
	FixedWindow
	// SlidingWindow admits Rate requests in any span of Period (a log of
	// request times in a sorted set). Exact, with no burst across window
	// boundaries, at a cost of memory and time proportional to Rate per key.
	SlidingWindow
)

// String returns the algorithm's name: "gcra", "fixed-window" or
// "sliding-window".
func (a Algorithm) String() string {
	return enum.String([]string{"gcra", "fixed-window", "sliding-window"}, a)
}

// Result is the outcome of one call.
type Result struct {
	// Allowed is how many of the n requests asked for were admitted: n or 0
	// for AllowN, anything from 0 to n for AllowAtMost.
	Allowed int
	// Remaining is how many more requests would be admitted right now, after
	// this call. It is the true figure also when the call was refused.
	Remaining int
	// RetryAfter is 0 when something was admitted (or n was 0). Otherwise it
	// is how long until the same call would be admitted, if nothing else
	// happens in between; it is always positive then.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its initial state
	// (Remaining at its maximum) if no more requests come; 0 when it is
	// there already.
	ResetAfter time.Duration
}

// Limiter admits or refuses requests per key, with all of the state in
// Redis. It is safe for concurrent use; concurrent calls share round trips
// (pipe.go), and it starts no goroutine, so it needs no Close.
type Limiter struct {
	pipe   pipe
	client redis.Scripter
	pl     pipeliner // client, if it can send a pipeline (every go-redis client); nil: it cannot
	alg    Algorithm
	prefix string
	script *redis.Script
	now    func() time.Time // nil: the server's clock; tests pin it (export_test.go)
}

// Option configures a Limiter.
type Option interface{ apply(*Limiter) }

type optionFunc func(*Limiter)

func (f optionFunc) apply(l *Limiter) { f(l) }

// DefaultKeyPrefix is the key prefix used unless WithKeyPrefix says
// otherwise.
const DefaultKeyPrefix = "ratelimit:"

// WithKeyPrefix sets the prefix of every Redis key the limiter writes. It
// must not contain '{' or '}', which would capture the hash tag (see New).
// The default is "ratelimit:".
func WithKeyPrefix(p string) Option { return optionFunc(func(l *Limiter) { l.prefix = p }) }

// New returns a Limiter using alg over client: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring, or anything else that runs scripts.
//
// The Redis key for a limiter key k is prefix + "{" + k + "}" + ":" + a
// suffix naming the algorithm, so that the keys of one limiter key share a
// Redis Cluster hash slot; a k that already has a hash tag ("{...}") is used
// as it is. It returns an *InvalidError for a nil client, an unknown
// algorithm or a prefix with braces.
func New(client redis.Scripter, alg Algorithm, opts ...Option) (*Limiter, error) {
	if nilcheck.IsNil(client) {
		return nil, invalid("client", "nil")
	}
	l := &Limiter{client: client, alg: alg, prefix: DefaultKeyPrefix}
	l.pl, _ = client.(pipeliner)
	switch alg {
	case GCRA:
		l.script = gcraScript
	case FixedWindow:
		l.script = fixedScript
	case SlidingWindow:
		l.script = slidingScript
	default:
		return nil, invalid("algorithm", "%v: use GCRA, FixedWindow or SlidingWindow", alg)
	}
	for _, o := range opts {
		if o != nil {
			o.apply(l)
		}
	}
	if strings.ContainsAny(l.prefix, "{}") {
		return nil, invalid("key prefix", "%q contains '{' or '}', which would capture the Redis Cluster hash tag", l.prefix)
	}
	return l, nil
}

// Algorithm returns the limiter's algorithm.
func (l *Limiter) Algorithm() Algorithm { return l.alg }

// Allow is AllowN(ctx, key, limit, 1).
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN admits n requests under limit for key, all or none: if fewer than n
// fit, it admits none and records nothing, and RetryAfter says when all n
// would fit. n = 0 only reports the state. It is one atomic script on the
// server's clock. It returns an *InvalidError for an empty key, an invalid
// limit, a negative n, or an n the limit never admits at once (above Burst
// for GCRA, above Rate for the windows); AllowAtMost takes what fits.
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	if n > limit.most(l.alg) && limit.Validate(l.alg) == nil {
		return Result{}, invalid("n", "%d: %v never admits more than %d at once; use AllowAtMost", n, limit, limit.most(l.alg))
	}
	return l.run(ctx, key, limit, n, "all")
}

// AllowAtMost admits as many of n requests as fit right now (possibly 0)
// and reports how many in Allowed. When none fit, RetryAfter says when one
// would. Errors are as for AllowN, except that any n >= 0 is valid.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	return l.run(ctx, key, limit, n, "most")
}

// Reset forgets key's state, so that its next request finds the limit at
// its initial state.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if key == "" {
		return invalid("key", "empty")
	}
	if err := resetScript.Run(ctx, l.client, l.keys(key)).Err(); err != nil {
		return fmt.Errorf("ratelimit: reset %q: %w", key, err)
	}
	return nil
}

func (l *Limiter) run(ctx context.Context, key string, limit Limit, n int, mode string) (Result, error) {
	if key == "" {
		return Result{}, invalid("key", "empty")
	}
	if err := limit.Validate(l.alg); err != nil {
		return Result{}, err
	}
	if n < 0 {
		return Result{}, invalid("n", "%d: must not be negative", n)
	}
	var now int64
	if l.now != nil {
		now = l.now().UnixMicro()
	}
	cmd, err := l.do(ctx, l.keys(key), []any{limit.Rate, limit.Burst, limit.Period.Microseconds(), n, mode, now})
	if err != nil {
		return Result{}, fmt.Errorf("ratelimit: %v %q: %w", l.alg, key, err)
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("ratelimit: %v %q: %w", l.alg, key, err)
	}
	if len(v) != 4 {
		return Result{}, fmt.Errorf("ratelimit: %v %q: unexpected script reply %v", l.alg, key, v)
	}
	return Result{
		Allowed:    int(v[0]),
		Remaining:  int(v[1]),
		RetryAfter: time.Duration(v[2]) * time.Microsecond,
		ResetAfter: time.Duration(v[3]) * time.Microsecond,
	}, nil
}

// keys returns the Redis keys of a limiter key, each built by one
// concatenation (Allow builds them on every call).
func (l *Limiter) keys(key string) []string {
	open, shut := hashTag(key)
	switch l.alg {
	case FixedWindow:
		return []string{l.prefix + open + key + shut + ":fw"}
	case SlidingWindow:
		base := l.prefix + open + key + shut
		return []string{base + ":sw", base + ":sw:seq"}
	}
	return []string{l.prefix + open + key + shut + ":tat"} // not ":gcra": that held the TAT as text before
}

// hashTag returns what to put before and after k so that the result has a
// Redis Cluster hash tag: braces, unless k already has a tag (a '{'
// followed later by a '}' with something between).
func hashTag(k string) (open, shut string) {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return "", ""
		}
	}
	if strings.HasPrefix(k, "}") {
		// "{" + k + "}" would open with an empty tag, which Redis ignores;
		// any non-empty tag shared by the key's Redis keys will do.
		return "{~", "}"
	}
	return "{", "}"
}
