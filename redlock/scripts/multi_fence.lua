-- Phase 2 of fenced Redlock for a multi-key lock on one node: acknowledge
-- token t for every key at once, or for none. counter.lua is put in front. Each key must pass exactly the
-- checks of fence.lua (docs/fencing.md, The proof): it holds our value, t is
-- not below the node's clock when it granted the key (the clock floor), and
-- its counter is below t, or equals t for this very owner (the strict
-- acceptor). Only if every key passes is t recorded in every fence hash.
-- KEYS[1..n] lock keys; KEYS[n+1..2n] their fence hashes. ARGV as fence.lua's:
-- ARGV[1] our value; ARGV[2] proposed token t; ARGV[3] the lock's TTL in ms;
-- ARGV[4] fence retention in ms; ARGV[5] "1": the clock floor, "0": counter
-- only.
-- Returns {1, t} ack, {0, counter} stale (the highest counter >= t), {-1, 0}
-- if a lock key does not hold our value here, {-3, granted} if t is below a
-- key's floor.
local n = #KEYS / 2
local t = tonumber(ARGV[2])
if not t or t < 1 or t >= MAXTOKEN then
	return redis.error_reply("fence token out of range: " .. ARGV[2])
end
local now
if ARGV[5] == "1" then
	local tm = redis.call("TIME")
	now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
end
local stale = nil
for i = 1, n do
	local f = KEYS[n + i]
	local cur, err = counter(f)
	if not cur then
		return err
	end
	if redis.call("GET", KEYS[i]) ~= ARGV[1] then
		return {-1, 0}
	end
	if now then
		local granted = (now - tonumber(ARGV[3]) + redis.call("PTTL", KEYS[i])) * 1000
		if t < granted - 2000 then
			return {-3, granted}
		end
	end
	if cur >= t and not (cur == t and owns(f, ARGV[1])) then
		stale = math.max(stale or 0, cur)
	end
end
if stale then
	return {0, stale}
end
for i = 1, n do
	record(KEYS[n + i], ARGV[2], ARGV[1], ARGV[4])
end
return {1, t}
