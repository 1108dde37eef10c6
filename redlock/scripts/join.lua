-- A waiting Lock's attempt on one node (quarantine.lua and queue.lua are put
-- in front): after the restart quarantine, the key is granted to us if we
-- hold it already (a release handed it over: its TTL then runs from now),
-- or if it is free and no waiter ahead of us is queued. Otherwise our entry
-- is written (or refreshed) and we wait.
-- KEYS[1] lock key; KEYS[2] the node's marker (with the quarantine on).
-- ARGV[1] our value; ARGV[2] TTL in ms; ARGV[3] quarantine in ms (0: off);
-- ARGV[4] the queue's key; ARGV[5] our ticket; ARGV[6] our round; ARGV[7]
-- the entry's life in ms; ARGV[8] the most waiters a queue takes; ARGV[9]
-- our client's name (queue.lua).
-- Returns {1, ahead} granted, ahead 1 when a waiter ahead of us is queued;
-- {0, 0} queued; {-2, ms} quarantined for ms more; {-5, 0} the queue is full.
local left = quarantine(KEYS[2], tonumber(ARGV[3]))
if left then
	return {-2, left}
end
local k, v, ttl, q = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local ticket, n, life = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local now = nowms()
local m = mine(q, ticket, v)
local cur = redis.call("GET", k)
if not cur then
	local h, hs = head(q, now)
	if not h or h == m or before(ticket, v, h, hs) then
		redis.call("SET", k, v, "PX", ttl)
		cur = v
	end
end
if cur == v then
	redis.call("PEXPIRE", k, ttl)
	if m then
		redis.call("ZREM", q, m)
	end
	local h, hs = head(q, now)
	if h and before(hs, string.match(h, "^[^:]+"), v .. ":", ticket) then
		return {1, 1}
	end
	return {1, 0}
end
if m then
	redis.call("ZREM", q, m)
elseif redis.call("ZCARD", q) >= tonumber(ARGV[8]) then
	return {-5, 0}
end
enqueue(q, ticket, v, n, ttl, life, now, ARGV[9])
return {0, 0}
