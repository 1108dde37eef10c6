-- Acquire of a multi-key lock on one node, all keys or none, atomically.
-- quarantine.lua is put in front. After the restart quarantine, every lock
-- key must be free or hold our value already (a repeated request); only then
-- is each one set to our value with the TTL and, with fencing, given a token.
-- Nothing is written before every key has been checked.
-- KEYS[1..n] the lock keys; with fencing, KEYS[n+1..2n] their fence hashes;
-- then, with the quarantine on, the node's marker. ARGV as acquire.lua's
-- (ARGV[1] our value, ARGV[2] TTL in ms, ARGV[3] mode, ARGV[4] quarantine in
-- ms, ARGV[5] fence retention in ms, ARGV[6] the clock floor), and ARGV[7] n.
-- Modes: "plain" (no fencing) and "fence1" (one node: each key's token is
-- max(counter + 1, clock), as acquire.lua's); fenced Redlock is refused by
-- the client.
-- Returns {1, t1, ..., tn} acquired (tokens with fence1, else zeros), {0, i}
-- when the i-th key is held by another owner, {-2, ms} quarantined for ms.
local n = tonumber(ARGV[7])
local mode = ARGV[3]
local fenced = mode == "fence1"
local marker = KEYS[n + 1]
if fenced then
	marker = KEYS[2 * n + 1]
end
local left = quarantine(marker, tonumber(ARGV[4]))
if left then
	return {-2, left}
end
local out = {1}
for i = 1, n do
	local v = redis.call("GET", KEYS[i])
	if v and v ~= ARGV[1] then
		return {0, i}
	end
	local t = 0
	if fenced then
		local f = KEYS[n + i]
		t = tonumber(redis.call("HGET", f, "t") or "0")
		if not t then
			return redis.error_reply("fence counter of " .. f .. " is not a number")
		end
		-- A repeated request keeps the token it was given.
		if not (v and redis.call("HGET", f, "owner") == ARGV[1]) then
			t = floor(t + 1)
			if t >= 9007199254740992 then
				return redis.error_reply("fence token would exceed 2^53")
			end
		end
	end
	out[i + 1] = t
end
for i = 1, n do
	redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
	if fenced then
		redis.call("HSET", KEYS[n + i], "t", string.format("%.0f", out[i + 1]), "owner", ARGV[1])
		redis.call("PEXPIRE", KEYS[n + i], ARGV[5])
	end
end
return out
