// Package ratelimit limits request rates per key with the state in Redis:
// GCRA (a token bucket, as in go-redis/redis_rate), a fixed window and a
// sliding window, each one atomic Lua script per call.
//
//	rl, err := ratelimit.New(rdb, ratelimit.GCRA)
//	res, err := rl.Allow(ctx, "user:42", ratelimit.PerSecond(10))
//	if res.Allowed == 0 { /* refuse; retry after res.RetryAfter */ }
//
// Each call reads the Redis server's clock (TIME), decides and records in
// one script, so concurrent callers, in one process or many, are never
// admitted beyond the limit, and clients' clocks do not matter. AllowN is
// all or nothing and AllowAtMost admits what fits; refused requests are not
// counted, and a refusal's RetryAfter is exact (to the µs, rounded up) if
// nothing else happens for the key meanwhile. A key's Redis keys share a
// hash tag, so every algorithm runs on Redis Cluster.
//
// The limits are only as durable as the one Redis deployment that holds
// them, with no quorum: a restart without persistence, a failover to a
// lagging replica or an eviction forgets recent requests and lets a new
// burst through. A wall-clock step on the server moves every window and
// bucket. Use one Limit per key: calls with different Limits read the same
// state differently.
//
// GCRA follows redis_rate's allow_n and allow_at_most, with deliberate
// differences (key names, exact time storage, RetryAfter and Remaining,
// validation). docs/coordination.md, Rate limits, has the scripts, those
// differences and the measured costs.
package ratelimit
