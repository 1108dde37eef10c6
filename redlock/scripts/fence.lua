-- Phase 2 of fenced Redlock on one node: acknowledge token t (token.lua's
-- acknowledge; counter.lua, quarantine.lua and token.lua are put in front).
-- KEYS[1] lock key; KEYS[2] fence hash. ARGV[1] our value; ARGV[2] proposed
-- token t; ARGV[3] the lock's TTL in ms; ARGV[4] fence retention in ms;
-- ARGV[5] "1": the clock floor, "0": counter only.
-- Returns {1, t} ack, {0, counter} stale (counter >= t), {-1, counter} if the
-- lock key does not hold our value here, {-3, granted} if t is below the floor.
local t = tonumber(ARGV[2])
if not t or t < 1 or t >= MAXTOKEN then
	return redis.error_reply("fence token out of range: " .. ARGV[2])
end
local no = acknowledge(KEYS[1], KEYS[2], t, ARGV[1], tonumber(ARGV[3]), ARGV[5] == "1")
if no then
	return no
end
record(KEYS[2], ARGV[2], ARGV[1], ARGV[4])
return {1, t}
