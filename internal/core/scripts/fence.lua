-- Phase 2 of fenced Redlock on one node: acknowledge token t.
-- KEYS[1] lock key; KEYS[2] fence hash. ARGV[1] our value; ARGV[2] proposed token t.
-- The acceptor rule is strict: acknowledge only if the node's counter is BELOW t
-- (then record t), or if it already equals t for this very owner (a repeated
-- request). Accepting "counter <= t" for anyone would let two acquisitions
-- share a token (docs/fencing.md, counter-example b).
-- Returns {1, t} ack, {0, counter} stale (counter >= t), {-1, counter} if the
-- lock key does not hold our value here.
local t = tonumber(ARGV[2])
local cur = tonumber(redis.call("HGET", KEYS[2], "t") or "0")
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
	return {-1, cur}
end
if cur < t then
	redis.call("HSET", KEYS[2], "t", ARGV[2], "owner", ARGV[1])
	return {1, t}
end
if cur == t and redis.call("HGET", KEYS[2], "owner") == ARGV[1] then
	return {1, t}
end
return {0, cur}
