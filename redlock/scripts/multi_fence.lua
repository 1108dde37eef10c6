-- Phase 2 of fenced Redlock for a multi-key lock on one node: acknowledge
-- token t for every key at once, or for none (counter.lua, quarantine.lua
-- and token.lua are put in front). Each key must pass token.lua's
-- acknowledge, as fence.lua's one key; only if every key passes is t
-- recorded in every fence hash.
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
local stale = nil
for i = 1, n do
	local no = acknowledge(KEYS[i], KEYS[n + i], t, ARGV[1], tonumber(ARGV[3]), ARGV[5] == "1")
	if no and no[1] == 0 then
		stale = math.max(stale or 0, no[2])
	elseif no and no[1] == -1 then
		return {-1, 0}
	elseif no then
		return no
	end
end
if stale then
	return {0, stale}
end
for i = 1, n do
	record(KEYS[n + i], ARGV[2], ARGV[1], ARGV[4])
end
return {1, t}
