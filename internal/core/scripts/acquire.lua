-- Acquire on one node: the restart quarantine, then the lock key, then (with
-- fencing) the fence counter, atomically.
-- KEYS[1] lock key; KEYS[2] fence hash; KEYS[3] the node's quarantine marker.
-- ARGV[1] our value; ARGV[2] TTL in ms; ARGV[3] mode; ARGV[4] quarantine in ms
-- (0: off); ARGV[5] fence retention in ms; ARGV[6] "1": the clock floor (a
-- token is never below this node's clock in microseconds), "0": counter only.
-- Modes: "plain" (no fencing), "fence1" (one node: the token is
-- max(counter + 1, clock); record it and return it), "fenceN" (phase 1 of
-- fenced Redlock: return max(counter, clock), whatever the outcome).
-- Returns {1, n} acquired, {0, n} held by another owner, {-2, ms} quarantined
-- for ms more; n is the token (fence1), the counter or clock (fenceN), or 0.
local tm
local function clock()
	tm = tm or redis.call("TIME")
	return tm
end
local q = tonumber(ARGV[4])
if q > 0 then
	local m = redis.call("HMGET", KEYS[3], "ready_at", "vouched")
	local t = clock()
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local ready = tonumber(m[1])
	-- Fast path: LASTSAVE is set at startup and at every successful save, so
	-- now - LASTSAVE never exceeds the uptime. If even that is past q (with a
	-- second of rounding), the node has been up longer than q: no INFO needed.
	local fast = ready and now >= ready and (tonumber(t[1]) - redis.call("LASTSAVE")) * 1000 > q + 1000
	if not fast then
		local info = redis.call("INFO", "server")
		local runid = string.match(info, "run_id:(%x+)")
		local up = tonumber(string.match(info, "uptime_in_seconds:(%d+)")) * 1000
		if m[2] ~= runid then
			if not ready then
				-- No marker: the node is new, or lost its data (restart without
				-- persistence, FLUSHALL). It may have forgotten a lock someone
				-- still holds: it sits out one quarantine period on its own clock.
				ready = now + q
				redis.call("HSET", KEYS[3], "ready_at", ready)
			end
			-- Restarted less than q ago: it may have lost recent keys even if
			-- the marker survived in an older snapshot.
			local left = math.max(ready - now, q - up)
			if left > 0 then
				return {-2, left}
			end
		end
	end
end
local mode = ARGV[3]
local n = 0
if mode ~= "plain" then
	n = tonumber(redis.call("HGET", KEYS[2], "t") or "0")
	if not n then
		return redis.error_reply("fence counter of " .. KEYS[2] .. " is not a number")
	end
end
local function floor(c)
	if ARGV[6] ~= "1" then
		return c
	end
	local t = clock()
	return math.max(c, tonumber(t[1]) * 1000000 + tonumber(t[2]))
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
