-- Acquire with a fencing token on a single node, in one round trip.
-- KEYS[1] lock key; KEYS[2] fence hash (field "t": the last token issued).
-- ARGV[1] our value; ARGV[2] TTL in milliseconds.
-- Returns the new token (> 0) if the lock was taken, 0 if another owner holds it.
-- The fence hash never expires and is never deleted by redfence.
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	local t = redis.call("HINCRBY", KEYS[2], "t", 1)
	redis.call("HSET", KEYS[2], "owner", ARGV[1])
	return t
end
return 0
