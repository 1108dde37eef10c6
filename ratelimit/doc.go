// Package ratelimit limits request rates per key with the state in Redis:
// a fixed window, a sliding window, and GCRA (a token bucket), each one
// atomic Lua script per call.
//
//	rl, err := ratelimit.New(rdb, ratelimit.GCRA)
//	res, err := rl.Allow(ctx, "user:42", ratelimit.PerSecond(10))
//	if res.Allowed == 0 { /* refuse; retry after res.RetryAfter */ }
//
// # Algorithms
//
//   - GCRA (generic cell rate algorithm, the algorithm of
//     go-redis/redis_rate): one key holds the theoretical arrival time
//     (TAT). A request of n is admitted when TAT + n*Period/Rate is at most
//     Burst*Period/Rate ahead of now, and moves TAT forward by n*Period/Rate.
//     Requests are spaced Period/Rate apart on average, with up to Burst at
//     once after a quiet spell.
//   - FixedWindow: Rate requests per window [k*Period, (k+1)*Period) of the
//     server's clock; a hash holds the window number and the count
//     (HINCRBY, PEXPIRE). Up to 2*Rate can pass in a short span around a
//     boundary.
//   - SlidingWindow: Rate requests in any span of Period; a sorted set of
//     admitted requests' times, trimmed by the same script. No boundary
//     burst; memory and time per call grow with Rate.
//
// # What it guarantees
//
//   - Atomicity: each call is one script: reading the state, deciding and
//     recording happen together, so concurrent callers, in one process or
//     many, are never admitted beyond the limit (the tests race 64 callers).
//   - Server time: the scripts read the Redis server's clock (TIME), so
//     clients' clocks, skewed or jumping, do not matter.
//   - AllowN is all or nothing: when fewer than n requests fit it admits
//     none and records nothing. AllowAtMost admits what fits. Refused
//     requests are not counted.
//   - RetryAfter of a refusal is exact (to the µs, rounded up) for the
//     request as asked, assuming no other request for the key meanwhile.
//   - Redis Cluster: a key's Redis keys share a hash tag ("{key}"), so the
//     two-key sliding window runs on a ClusterClient.
//
// # What it does not guarantee
//
//   - The limits are only as durable as the Redis holding them: a restart
//     without persistence, a failover to a lagging replica or an eviction
//     forgets recent requests and lets a new burst through. Keys expire on
//     their own once they no longer matter (at most one Period, or the
//     GCRA's time to refill).
//   - A limiter is one Redis deployment (one primary per key): there is no
//     multi-node quorum here, unlike package redlock.
//   - Time is the server's: a wall-clock jump on the Redis server (NTP step)
//     moves every window and bucket with it.
//   - Limits are per call, not per key: calls for one key with different
//     Limits interpret the same state differently. Use one Limit per key.
//
// # Compared with go-redis/redis_rate
//
// GCRA here follows redis_rate's allow_n and allow_at_most scripts: the
// same admission rule, Remaining, RetryAfter and ResetAfter. The
// differences, all deliberate:
//
//   - State is not shared with redis_rate: keys are "ratelimit:{key}:gcra"
//     (redis_rate: "rate:key"), and TAT is stored as seconds plus
//     microseconds with a fraction, so that rounding cannot pile up over a
//     burst (redis_rate keeps a float of seconds since 2017, about 0.06µs
//     resolution, rounded at every request). The admission test allows
//     1e-9 of a request for float rounding; redis_rate's is exact. The
//     exact storage costs a few µs of server time per call (number
//     formatting and parsing in Lua; see docs/performance.md).
//   - RetryAfter is 0, not -1, when something was admitted.
//   - Remaining on a refusal is what is left (redis_rate reports 0).
//   - AllowN with n above Burst returns an error wrapping ErrInvalid
//     (redis_rate refuses it with a RetryAfter that never comes true).
//   - AllowAtMost admits and charges whole requests only (redis_rate moves
//     TAT by the fractional number of requests that would fit).
//   - Limits are validated: zero or negative Rate, Burst or Period is an
//     error (redis_rate divides by zero).
//   - Times are integers of microseconds; key TTLs are set in milliseconds
//     (redis_rate: seconds, rounded up).
//   - Result has no Limit field; the client only needs to run scripts
//     (redis.Scripter), and Reset is a script too.
//   - The scripts do not call redis.replicate_commands: Redis 5 and later
//     replicate script effects by default, and Redis 7 deprecates it.
//
// See docs/coordination.md for the scripts and measured costs.
package ratelimit
