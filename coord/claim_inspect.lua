-- Inspect a claim key on one node: what it holds, and for how long.
-- KEYS[1] the claim's lock key. ARGV[1] the done-marker prefix.
-- Returns {0, 0, ""} free; {1, pttl, value} held by a lease (in flight);
-- {2, pttl, marker} done. GET and PTTL in one script, so they agree.
local v = redis.call("GET", KEYS[1])
if not v then
	return {0, 0, ""}
end
local pttl = redis.call("PTTL", KEYS[1])
if string.sub(v, 1, #ARGV[1]) == ARGV[1] then
	return {2, pttl, v}
end
return {1, pttl, v}
