-- Acquire of a multi-key lock on one node, all keys or none, atomically.
-- counter.lua and quarantine.lua are put in front. After the restart quarantine, every lock
-- key must be free or hold our value already (a repeated request); only then
-- is each one set to our value with the TTL and, with fence1, given a token.
-- Nothing is written before every key has been checked.
-- KEYS[1..n] the lock keys; with fencing, KEYS[n+1..2n] their fence hashes;
-- then, with the quarantine on, the node's marker. ARGV as acquire.lua's
-- (ARGV[1] our value, ARGV[2] TTL in ms, ARGV[3] mode, ARGV[4] quarantine in
-- ms, ARGV[5] fence retention in ms, ARGV[6] the clock floor), and ARGV[7] n.
-- Modes, as acquire.lua's: "plain" (no fencing), "fence1" (one node: each
-- key's token is max(counter + 1, clock), recorded), "fenceN" (phase 1 of
-- fenced Redlock: return max(every key's counter, clock), whatever the
-- outcome; multi_fence.lua is phase 2).
-- Returns {1, t1, ..., tn} acquired (tokens with fence1, else zeros), {1, c}
-- acquired with fenceN, {0, i} the i-th key is held by another owner ({0, c}
-- with fenceN), {-2, ms} quarantined for ms more.
local n = tonumber(ARGV[7])
local mode = ARGV[3]
local fenced = mode == "fence1"
local marker = KEYS[n + 1]
if mode ~= "plain" then
	marker = KEYS[2 * n + 1]
end
local left = quarantine(marker, tonumber(ARGV[4]))
if left then
	return {-2, left}
end
local out = {1}
local taken = 0
local highest = 0 -- fenceN: the highest counter
for i = 1, n do
	local v = redis.call("GET", KEYS[i])
	if v and v ~= ARGV[1] and taken == 0 then
		taken = i
	end
	if mode == "fenceN" then
		local c, err = counter(KEYS[n + i])
		if not c then
			return err
		end
		highest = math.max(highest, c)
	end
	if taken > 0 and mode ~= "fenceN" then
		return {0, taken}
	end
	local t = 0
	if fenced then
		local f, err = KEYS[n + i], nil
		t, err = counter(f)
		if not t then
			return err
		end
		-- A repeated request keeps the token it was given.
		if not (v and owns(f, ARGV[1])) then
			t, err = nexttoken(t)
			if not t then
				return err
			end
		end
	end
	out[i + 1] = t
end
if mode == "fenceN" then
	out = {1, floor(highest)}
end
if taken > 0 then
	return {0, out[2]}
end
for i = 1, n do
	redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
	if fenced then
		record(KEYS[n + i], out[i + 1], ARGV[1], ARGV[5])
	end
end
return out
