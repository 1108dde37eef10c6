-- Phase 1 of fenced Redlock on one node: take the lock key and report the
-- node's fence counter.
-- KEYS[1] lock key; KEYS[2] fence hash. ARGV[1] our value; ARGV[2] TTL in ms.
-- Returns {1, counter} if the key now holds our value, {0, counter} if another
-- owner holds it. The counter is the highest token this node acknowledged.
local t = tonumber(redis.call("HGET", KEYS[2], "t") or "0")
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return {1, t}
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return {1, t}
end
return {0, t}
