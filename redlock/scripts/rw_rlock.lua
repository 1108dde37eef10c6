-- Acquire a read lease on one node, atomically. quarantine.lua and rw.lua
-- are put in front. After the restart quarantine: refused while the lock key
-- holds a writer's (or a plain Mutex's) value; the readers whose expiry has
-- come are removed; refused while a waiting writer's intent marker is there,
-- unless our value is recorded already (a repeated request); otherwise our
-- value is recorded with expiry now + TTL, and flag() makes the lock key and
-- the set last as long as their last reader.
-- KEYS[1] lock key; KEYS[2] readers' set; KEYS[3] writer-intent marker;
-- KEYS[4] the node's quarantine marker (only with the quarantine on).
-- ARGV[1] our value; ARGV[2] TTL in ms; ARGV[3] quarantine in ms (0: off).
-- Returns {1, 0} admitted, {0, 0} a writer holds, {3, 0} a writer waits,
-- {-2, ms} quarantined for ms more.
local left = quarantine(KEYS[4], tonumber(ARGV[3]))
if left then
	return {-2, left}
end
local held = redis.call("GET", KEYS[1])
if held and held ~= READERS then
	return {0, 0}
end
local now = rwnow()
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if not redis.call("ZSCORE", KEYS[2], ARGV[1]) and redis.call("EXISTS", KEYS[3]) == 1 then
	return {3, 0}
end
redis.call("ZADD", KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
flag(KEYS[1], KEYS[2])
return {1, 0}
