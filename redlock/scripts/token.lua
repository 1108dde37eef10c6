-- The token rule of fencing (docs/fencing.md, The proof), put after
-- counter.lua and quarantine.lua in front of the acquires and of phase 2
-- (fence.lua, multi_fence.lua) by scripts.go. An acquire's token is the
-- counter plus one, never below this node's clock in microseconds;
-- phase 2 acknowledges a proposal only above the counter and the clock.
-- floor(c) is the clock floor of tokens when ARGV[6] is "1", c itself
-- otherwise.
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
-- acknowledge(k, hash, t, value, ttl, floored) is phase 2's rule for lock
-- key k and its fence hash: nil when proposal t may be recorded for value,
-- else the refusal: {-1, counter} k does not hold value; {-3, granted} t is
-- below this node's clock when it granted k (floored; the key's age from
-- its TTL in ms, 2ms for rounding), since a node that forgot its counter
-- still has its clock; {0, counter} the counter is not below t and was not
-- given t for value (the strict acceptor: accepting "counter <= t" from
-- anyone would let two leases share a token).
local function acknowledge(k, hash, t, value, ttl, floored)
	local cur, err = counter(hash)
	if not cur then
		return err
	end
	if redis.call("GET", k) ~= value then
		return {-1, cur}
	end
	if floored then
		local tm = clock()
		local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
		local granted = (now - ttl + redis.call("PTTL", k)) * 1000
		if t < granted - 2000 then
			return {-3, granted}
		end
	end
	if cur < t or (cur == t and owns(hash, value)) then
		return nil
	end
	return {0, cur}
end
