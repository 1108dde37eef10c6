-- Extend a semaphore permit on one node: after removing the members whose
-- expiry has come (TIME), renew our member to now + TTL, only if it is still
-- there. Never re-adds a missing member (another holder may have taken the
-- permit in the gap). KEYS[1] the semaphore; ARGV[1] our value; ARGV[2] TTL
-- in ms. Returns 1 if renewed, 0 otherwise.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
	return 0
end
local ttl = tonumber(ARGV[2])
redis.call("ZADD", KEYS[1], "XX", now + ttl, ARGV[1])
if redis.call("PTTL", KEYS[1]) < ttl then
	redis.call("PEXPIRE", KEYS[1], ttl)
end
return 1
