-- Shared head of the acquire scripts (acquire.lua, multi_acquire.lua,
-- sem_acquire.lua, rw_*lock.lua), put in front of each after counter.lua
-- (scripts.go): Lua scripts cannot include each other.
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
local function floor(c)
	if ARGV[6] ~= "1" then
		return c
	end
	local t = clock()
	return math.max(c, tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
-- begin(marker, hash) is an acquire's first two steps: the restart
-- quarantine (marker, ARGV[4] ms), then the counter in hash that the mode
-- ARGV[3] starts from (0 in "plain"). It returns a reply to send at once
-- ({-2, ms} quarantined, or a bad counter's error), or nil, the mode and the
-- counter.
local function begin(marker, hash)
	local left = quarantine(marker, tonumber(ARGV[4]))
	if left then
		return {-2, left}
	end
	local mode = ARGV[3]
	if mode == "plain" then
		return nil, mode, 0
	end
	local n, err = counter(hash)
	if not n then
		return err
	end
	return nil, mode, n
end
-- nexttoken(c) is fence1's token after counter c, floor(c + 1); nil and an
-- error reply at 2^53.
local function nexttoken(c)
	local t = floor(c + 1)
	if t >= MAXTOKEN then
		return nil, redis.error_reply("fence token would exceed 2^53")
	end
	return t
end
-- refusal(st, mode, c) is the reply {st, c} of a refused acquire with
-- counter c: in "fenceN", phase 1 returns floor(c) whatever the outcome.
local function refusal(st, mode, c)
	if mode == "fenceN" then
		c = floor(c)
	end
	return {st, c}
end
-- grant(hash, mode, c) is the reply of a granted acquire with counter c:
-- "fence1" records the next token for ARGV[1] (kept ARGV[5] ms) and returns
-- it; "fenceN" returns floor(c); "plain" {1, 0}.
local function grant(hash, mode, c)
	if mode ~= "fence1" then
		return refusal(1, mode, c)
	end
	local t, err = nexttoken(c)
	if not t then
		return err
	end
	record(hash, t, ARGV[1], ARGV[5])
	return {1, t}
end
