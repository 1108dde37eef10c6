-- Phase 2 of fenced Redlock on one node: acknowledge token t. counter.lua is
-- put in front.
-- KEYS[1] lock key; KEYS[2] fence hash. ARGV[1] our value; ARGV[2] proposed
-- token t; ARGV[3] the lock's TTL in ms; ARGV[4] fence retention in ms;
-- ARGV[5] "1": the clock floor, "0": counter only.
-- Two rules, both needed (docs/fencing.md, The proof):
-- * strict acceptor: acknowledge only if the node's counter is BELOW t (then
--   record t), or already equals t for this very owner (a repeated request).
--   Accepting "counter <= t" for anyone would let two acquisitions share a
--   token (counter-example b).
-- * clock floor: never acknowledge a t below this node's clock at the moment
--   it granted our key (the key's age, from its TTL; 2ms for rounding). A
--   node that forgot its counter still has its clock.
-- Returns {1, t} ack, {0, counter} stale (counter >= t), {-1, counter} if the
-- lock key does not hold our value here, {-3, granted} if t is below the floor.
local t = tonumber(ARGV[2])
if not t or t < 1 or t >= MAXTOKEN then
	return redis.error_reply("fence token out of range: " .. ARGV[2])
end
local cur, err = counter(KEYS[2])
if not cur then
	return err
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
	return {-1, cur}
end
if ARGV[5] == "1" then
	local tm = redis.call("TIME")
	local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
	local granted = (now - tonumber(ARGV[3]) + redis.call("PTTL", KEYS[1])) * 1000
	if t < granted - 2000 then
		return {-3, granted}
	end
end
if cur < t then
	record(KEYS[2], ARGV[2], ARGV[1], ARGV[4])
	return {1, t}
end
if cur == t and owns(KEYS[2], ARGV[1]) then
	return {1, t}
end
return {0, cur}
