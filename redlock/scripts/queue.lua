-- Shared head of the scripts that keep a key's queue of waiting Lock calls
-- (join.lua, release.lua; scripts.go puts quarantine.lua and this in
-- front). The queue is a sorted set beside the lock key, named by the
-- client (its key comes in ARGV, so that a user whose ACL does not reach it
-- still releases; pcall where that matters). Each waiter is one member,
-- "value:round:ttl:expiry:client", scored by its ticket: the set's order, ticket
-- then value, is the same on every node. round is the waiter's attempt
-- that last wrote the entry, ttl the TTL of the lease it wants, expiry when
-- the entry lapses (node clock, ms): a waiter that stops refreshing it
-- (it died) is skipped once it lapses; client the name of the waiter's
-- engine, whose channel hears of its grant.
local function entry(m)
	local v, n, ttl, exp, c = string.match(m, "^([^:]+):(%d+):(%d+):(%d+):([^:]*)$")
	return v, n, tonumber(ttl), tonumber(exp), c
end
local function nowms()
	local t = clock()
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- mine(q, ticket, v) is the member of v, whose ticket is ticket, or nil.
local function mine(q, ticket, v)
	for _, m in ipairs(redis.call("ZRANGE", q, ticket, ticket, "BYSCORE")) do
		if string.sub(m, 1, #v + 1) == v .. ":" then
			return m
		end
	end
	return nil
end
-- head(q, now) is the first entry that has not lapsed and its ticket
-- (dropping the lapsed ones before it), or nil.
local function head(q, now)
	while true do
		local h = redis.call("ZRANGE", q, 0, 0, "WITHSCORES")
		if #h == 0 then
			return nil
		end
		local _, _, _, exp = entry(h[1])
		if exp and exp > now then
			return h[1], tonumber(h[2])
		end
		redis.call("ZREM", q, h[1])
	end
end
-- before(t1, v1, m2, t2) reports whether (t1, v1) comes before member m2
-- with ticket t2 in the queue's order.
local function before(t1, v1, m2, t2)
	return t1 < t2 or (t1 == t2 and v1 .. ":" < m2)
end
-- give(k, q, m, ch) gives the free lock key k to the waiter of member m
-- and tells its client on ch .. "#" .. client: "g:value:round".
local function give(k, q, m, ch)
	local v, n, ttl, _, c = entry(m)
	redis.call("SET", k, v, "PX", ttl)
	redis.call("ZREM", q, m)
	redis.pcall("PUBLISH", ch .. "#" .. c, "g:" .. v .. ":" .. n)
end
-- enqueue(q, ticket, v, n, ttl, life, now, c) writes v's entry.
local function enqueue(q, ticket, v, n, ttl, life, now, c)
	redis.call("ZADD", q, ticket, v .. ":" .. n .. ":" .. ttl .. ":" .. (now + life) .. ":" .. c)
	if redis.call("PTTL", q) < 2 * life then
		redis.call("PEXPIRE", q, 2 * life)
	end
end
