-- Sliding window (a log): at most rate requests in any span of period. A
-- sorted set holds one member per admitted request, scored by its server
-- time in µs; members older than the window are trimmed in the same script.
-- Members are "<time>:<sequence>", the sequence from a counter key beside the
-- set, so two requests in the same microsecond stay two members.
-- KEYS[1] the sorted set; KEYS[2] the sequence counter (same hash tag).
-- ARGV as in args.lua, parsed ahead of this script (the burst is not used).
-- Returns {allowed, remaining, retry_after µs, reset_after µs}.

-- a request made at time t counts while now < t + period
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", string.format("%.0f", now - period))
local count = redis.call("ZCARD", KEYS[1])

local avail = math.max(rate - count, 0)
local take = admit(avail)

-- µs until the request of rank k (1 = oldest) leaves the window
local function leaves(k)
	local e = redis.call("ZRANGE", KEYS[1], k - 1, k - 1, "WITHSCORES")
	if #e == 0 then
		return 0
	end
	return math.max(tonumber(e[2]) + period - now, 1)
end

if take == 0 then
	local retry = 0
	if n > 0 then
		retry = leaves(count + need - rate)
	end
	local reset = 0
	if count > 0 then
		reset = leaves(count)
	end
	return {0, avail, retry, reset}
end

local seq = redis.call("INCRBY", KEYS[2], take) - take
local ts = string.format("%.0f", now)
local args = {}
for i = 1, take do
	args[#args + 1] = ts
	args[#args + 1] = ts .. ":" .. string.format("%.0f", seq + i)
	if #args >= 1000 or i == take then
		redis.call("ZADD", KEYS[1], unpack(args))
		args = {}
	end
end
local ttl = keepms(period)
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("PEXPIRE", KEYS[2], ttl)
return {take, avail - take, 0, period}
