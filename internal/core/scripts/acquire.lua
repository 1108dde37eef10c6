-- Acquire on one node: the restart quarantine, then the lock key, then (with
-- fencing) the fence counter, atomically. quarantine.lua is put in front.
-- KEYS[1] lock key; KEYS[2] fence hash; KEYS[3] the node's quarantine marker.
-- ARGV[1] our value; ARGV[2] TTL in ms; ARGV[3] mode; ARGV[4] quarantine in ms
-- (0: off); ARGV[5] fence retention in ms; ARGV[6] "1": the clock floor (a
-- token is never below this node's clock in microseconds), "0": counter only.
-- Modes: "plain" (no fencing), "fence1" (one node: the token is
-- max(counter + 1, clock); record it and return it), "fenceN" (phase 1 of
-- fenced Redlock: return max(counter, clock), whatever the outcome).
-- Returns {1, n} acquired, {0, n} held by another owner, {-2, ms} quarantined
-- for ms more; n is the token (fence1), the counter or clock (fenceN), or 0.
local left = quarantine(KEYS[3], tonumber(ARGV[4]))
if left then
	return {-2, left}
end
local mode = ARGV[3]
local n = 0
if mode ~= "plain" then
	n = tonumber(redis.call("HGET", KEYS[2], "t") or "0")
	if not n then
		return redis.error_reply("fence counter of " .. KEYS[2] .. " is not a number")
	end
end
-- SET NX first: the common case is a free key. Only when it is taken, check
-- whether it is ours already (a repeated request).
if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	if redis.call("GET", KEYS[1]) ~= ARGV[1] then
		if mode == "fenceN" then
			n = floor(n)
		end
		return {0, n}
	end
	if mode == "fence1" and redis.call("HGET", KEYS[2], "owner") == ARGV[1] then
		return {1, n} -- a repeated request: the token it was given
	end
end
if mode == "fence1" then
	n = floor(n + 1)
	if n >= 9007199254740992 then
		return redis.error_reply("fence token would exceed 2^53")
	end
	redis.call("HSET", KEYS[2], "t", string.format("%.0f", n), "owner", ARGV[1])
	redis.call("PEXPIRE", KEYS[2], ARGV[5])
elseif mode == "fenceN" then
	n = floor(n)
end
return {1, n}
