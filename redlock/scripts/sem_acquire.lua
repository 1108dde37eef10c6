-- Acquire one permit of a semaphore on one node, atomically. quarantine.lua
-- is put in front. The semaphore is a sorted set of holder values, each
-- scored with its expiry in ms on this node's clock (TIME). After the restart
-- quarantine, members whose expiry has come are removed; our value, if still
-- there (a repeated request), is renewed; otherwise it is added only if fewer
-- than ARGV[3] members remain. The key itself expires with its last member.
-- KEYS[1] the semaphore; KEYS[2] the node's marker (only with the quarantine
-- on). ARGV[1] our value, ARGV[2] TTL in ms, ARGV[3] permits, ARGV[4]
-- quarantine in ms.
-- Returns {1, 0} admitted, {0, 0} every permit is held, {-2, ms} quarantined
-- for ms more.
local left = quarantine(KEYS[2], tonumber(ARGV[4]))
if left then
	return {-2, left}
end
local t = clock()
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) and redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[3]) then
	return {0, 0}
end
local ttl = tonumber(ARGV[2])
redis.call("ZADD", KEYS[1], now + ttl, ARGV[1])
local last = redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")
redis.call("PEXPIRE", KEYS[1], math.max(tonumber(last[2]) - now, ttl))
return {1, 0}
