-- Shared head of the scripts that read or write fence counters (the
-- acquires and fence.lua, multi_fence.lua), put in front of each
-- (scripts.go). A fence hash holds the counter "t", the last token given on
-- this node, and "owner", the value of the lease it was given to.
-- MAXTOKEN is 2^53: above it a token is no longer exact as a Lua number.
local MAXTOKEN = 9007199254740992
-- counter(hash) is the counter in hash, 0 when there is none; nil and an
-- error reply when it is not a number.
local function counter(hash)
	local c = tonumber(redis.call("HGET", hash, "t") or "0")
	if not c then
		return nil, redis.error_reply("fence counter of " .. hash .. " is not a number")
	end
	return c
end
-- owns(hash, value) reports whether the counter was last given to value.
local function owns(hash, value)
	return redis.call("HGET", hash, "owner") == value
end
-- record(hash, t, value, ms) gives token t (a number or its decimal string)
-- to value and keeps the hash for ms.
local function record(hash, t, value, ms)
	if type(t) == "number" then
		t = string.format("%.0f", t)
	end
	redis.call("HSET", hash, "t", t, "owner", value)
	redis.call("PEXPIRE", hash, ms)
end
