-- Read the leader on one node: the lock key's value and TTL, and the info
-- hash only if it was written by the current holder of the lock.
-- KEYS[1] the election's lock key; KEYS[2] its info hash.
-- Returns {} free; {value, pttl} held, no matching info;
-- {value, pttl, identity, epoch, since} held and proclaimed.
local v = redis.call("GET", KEYS[1])
if not v then
	return {}
end
local pttl = redis.call("PTTL", KEYS[1])
local info = redis.call("HMGET", KEYS[2], "value", "identity", "epoch", "since")
if info[1] ~= v then
	return {v, pttl}
end
return {v, pttl, info[2], info[3], info[4]}
