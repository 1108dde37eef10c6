-- Acquire on one node: the restart quarantine, then the lock key, then (with
-- fencing) the fence counter, atomically. counter.lua and quarantine.lua are
-- put in front.
-- KEYS[1] lock key; KEYS[2] fence hash; KEYS[3] the node's quarantine marker.
-- ARGV[1] our value; ARGV[2] TTL in ms; ARGV[3] mode; ARGV[4] quarantine in ms
-- (0: off); ARGV[5] fence retention in ms; ARGV[6] "1": the clock floor (a
-- token is never below this node's clock in microseconds), "0": counter only.
-- Modes: "plain" (no fencing), "fence1" (one node: the token is
-- max(counter + 1, clock); record it and return it), "fenceN" (phase 1 of
-- fenced Redlock: return max(counter, clock), whatever the outcome).
-- Returns {1, n} acquired, {0, n} held by another owner, {-2, ms} quarantined
-- for ms more; n is the token (fence1), the counter or clock (fenceN), or 0.
local stop, mode, n = begin(KEYS[3], KEYS[2])
if stop then
	return stop
end
-- SET NX first: the common case is a free key. Only when it is taken, check
-- whether it is ours already (a repeated request).
if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	if redis.call("GET", KEYS[1]) ~= ARGV[1] then
		return refusal(0, mode, n)
	end
	-- Ours already (a repeated request, or a waiter's claim of a key a
	-- release handed it): its TTL runs from now, after the round's start.
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	if mode == "fence1" and owns(KEYS[2], ARGV[1]) then
		return {1, n} -- a repeated request: the token it was given
	end
end
return grant(KEYS[2], mode, n)
