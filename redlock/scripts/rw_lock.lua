-- Acquire a write lease on one node, atomically. counter.lua, quarantine.lua
-- and rw.lua are put in front. As acquire.lua (the restart quarantine, then
-- the lock key, then with fencing the counter, in the same modes and
-- replies), with the readers first: those whose expiry has come are removed, and while any
-- other is recorded the writer is refused, leaving, when ARGV[7] > 0 (a
-- waiting Lock), the intent marker that holds new readers back for ARGV[7]
-- ms. A READERS left on the lock key with no reader recorded is the last
-- readers' flag: it is deleted. A granted writer deletes the intent marker.
-- KEYS[1] lock key; KEYS[2] fence hash; KEYS[3] readers' set; KEYS[4]
-- writer-intent marker; KEYS[5] the node's quarantine marker (only with the
-- quarantine on). ARGV[1]..ARGV[6] as acquire.lua's; ARGV[7] the intent
-- marker's TTL in ms (0: leave none).
-- Returns {1, n} acquired, {0, n} held by another writer (or a plain Mutex),
-- {2, n} held by readers, {-2, ms} quarantined for ms more; n as acquire.lua's.
local stop, mode, n = begin(KEYS[5], KEYS[2])
if stop then
	return stop
end
redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", rwnow())
if redis.call("ZCARD", KEYS[3]) > 0 then
	if tonumber(ARGV[7]) > 0 then
		redis.call("SET", KEYS[4], "1", "PX", ARGV[7])
	end
	return refusal(2, mode, n)
end
local held = redis.call("GET", KEYS[1])
if held == READERS then
	redis.call("DEL", KEYS[1])
	held = false
end
if held and held ~= ARGV[1] then
	return refusal(0, mode, n)
end
redis.call("DEL", KEYS[4])
if not held then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
elseif mode == "fence1" and owns(KEYS[2], ARGV[1]) then
	return {1, n} -- a repeated request: the token it was given
end
return grant(KEYS[2], mode, n)
