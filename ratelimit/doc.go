// Package ratelimit limits request rates per key with the state in Redis:
// GCRA (as in go-redis/redis_rate), a fixed window and a sliding window,
// each one atomic Lua script per call.
//
//	rl, err := ratelimit.New(rdb, ratelimit.GCRA)
//	res, err := rl.Allow(ctx, "user:42", ratelimit.PerSecond(10))
//	if res.Allowed == 0 { /* refuse; retry after res.RetryAfter */ }
//
// Each call decides on the server's clock, so concurrent callers are never
// admitted beyond the limit. AllowN is all or nothing, AllowAtMost admits
// what fits; refusals are not counted. Concurrent calls on one Limiter
// travel together, as one pipeline, while others are on their way. The
// limits are as durable as the one Redis that holds them: a restart without
// persistence, a failover or an eviction forgets recent requests.
// docs/coordination.md, Rate limits, has the scripts and costs.
package ratelimit
