-- Shared head of the acquire scripts (acquire.lua, multi_acquire.lua), put in
-- front of each (scripts.go): Lua scripts cannot include each other.
-- clock() is the node's TIME, read once per call. quarantine(marker, q) is
-- the restart quarantine: nil when the node may vote, else how many ms it
-- still sits out (q in ms; 0: off, and marker is not touched). floor(c) is
-- the clock floor of tokens when ARGV[6] is "1" (a token is never below this
-- node's clock in microseconds), c itself otherwise.
local tm
local function clock()
	tm = tm or redis.call("TIME")
	return tm
end
local function quarantine(marker, q)
	if q <= 0 then
		return nil
	end
	local m = redis.call("HMGET", marker, "ready_at", "vouched")
	local t = clock()
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local ready = tonumber(m[1])
	-- Fast path: LASTSAVE is set at startup and at every successful save, so
	-- now - LASTSAVE never exceeds the uptime. If even that is past q (with a
	-- second of rounding), the node has been up longer than q: no INFO needed.
	local fast = ready and now >= ready and (tonumber(t[1]) - redis.call("LASTSAVE")) * 1000 > q + 1000
	if fast then
		return nil
	end
	local info = redis.call("INFO", "server")
	local runid = string.match(info, "run_id:(%x+)")
	local up = tonumber(string.match(info, "uptime_in_seconds:(%d+)")) * 1000
	if m[2] == runid then
		return nil
	end
	if not ready then
		-- No marker: the node is new, or lost its data (restart without
		-- persistence, FLUSHALL). It may have forgotten a lock someone
		-- still holds: it sits out one quarantine period on its own clock.
		ready = now + q
		redis.call("HSET", marker, "ready_at", ready)
	end
	-- Restarted less than q ago: it may have lost recent keys even if the
	-- marker survived in an older snapshot.
	local left = math.max(ready - now, q - up)
	if left > 0 then
		return left
	end
	return nil
end
local function floor(c)
	if ARGV[6] ~= "1" then
		return c
	end
	local t = clock()
	return math.max(c, tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
