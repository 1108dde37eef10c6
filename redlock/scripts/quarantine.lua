-- The restart quarantine, put in front of the scripts that let a node vote
-- (the acquires, after counter.lua; join.lua and release.lua) by scripts.go:
-- Lua scripts cannot include each other. clock() is the node's TIME, read
-- once per call. quarantine(marker, q) is nil when the node may vote, else
-- how many ms it still sits out (q in ms; 0: off, and marker is not
-- touched). docs/design.md, Restart quarantine, has the rule.
local tm
local function clock()
	tm = tm or redis.call("TIME")
	return tm
end
local function quarantine(marker, q)
	if q <= 0 then
		return nil
	end
	local m = redis.call("HMGET", marker, "ready_at", "vouched", "id")
	local t = clock()
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local ready = tonumber(m[1])
	-- The marker's id changes only when the marker is created: the proven
	-- form of an acquire (proof.go) reads it to see a marker lost or made
	-- anew. A marker of an older version gets one now.
	if (m[1] or m[2]) and not m[3] then
		redis.call("HSET", marker, "id", t[1] .. "." .. t[2])
	end
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
		redis.call("HSET", marker, "ready_at", ready, "id", t[1] .. "." .. t[2])
	end
	-- Restarted less than q ago: it may have lost recent keys even if the
	-- marker survived in an older snapshot.
	local left = math.max(ready - now, q - up)
	if left > 0 then
		return left
	end
	return nil
end
