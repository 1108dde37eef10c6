-- Extend a read lease on one node (rw.lua is put in front): after removing
-- the readers whose expiry has come, renew our expiry to now + TTL, only if
-- our value is still recorded. Never re-adds a missing or expired reader (a
-- writer may have held the key in the gap). KEYS[1] lock key; KEYS[2]
-- readers' set. ARGV[1] our value; ARGV[2] TTL in ms. Returns 1 if renewed,
-- 0 otherwise.
local now = rwnow()
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if not redis.call("ZSCORE", KEYS[2], ARGV[1]) then
	return 0
end
redis.call("ZADD", KEYS[2], "XX", now + tonumber(ARGV[2]), ARGV[1])
flag(KEYS[1], KEYS[2])
return 1
