-- Release a semaphore permit on one node: remove our member, and no other.
-- KEYS[1] the semaphore; ARGV[1] our value. Returns 1 if it was there (and
-- unexpired on this node's clock), 0 otherwise.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
return redis.call("ZREM", KEYS[1], ARGV[1])
