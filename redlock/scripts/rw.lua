-- Shared head of the read-write lock's scripts (rw_*.lua), put in front of
-- each (scripts.go; after quarantine.lua in the acquires). On a node the
-- lock key holds a writer's value (or a plain Mutex's), or READERS while
-- readers hold; the readers are a sorted set of their values, each scored
-- with its own expiry in ms on this node's clock (TIME).
-- READERS is no lease's value: those are base64url, without a colon.
local READERS = "redfence:readers"
-- rwnow is this node's clock in ms.
local function rwnow()
	local t = redis.call("TIME")
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- flag makes the lock key and the readers' set end with the last reader:
-- both expire at the latest expiry in the set, or, with none left, the set
-- is gone and the lock key's READERS is deleted. A plain Mutex's SET NX on
-- the lock key is so refused exactly while a reader is recorded. The lock
-- key is set only when absent or READERS: while a reader is unexpired it
-- holds nothing else (the writer's script refuses while one is recorded).
local function flag(key, readers)
	local last = redis.call("ZRANGE", readers, -1, -1, "WITHSCORES")
	local held = redis.call("GET", key)
	if #last == 0 then
		if held == READERS then
			redis.call("DEL", key)
		end
		return
	end
	if not held or held == READERS then
		redis.call("SET", key, READERS, "PXAT", last[2])
	end
	redis.call("PEXPIREAT", readers, last[2])
end
