-- Fixed window: at most rate requests in each window [k*period, (k+1)*period)
-- of the server's clock. One hash holds the window number and its count: the
-- window is decided by TIME alone, never by when Redis gets round to expiring
-- the key, and the count is raised (HINCRBY) only by requests admitted, so
-- refused requests do not use up the window.
-- KEYS[1] state hash {w = window number, c = count}.
-- ARGV as in args.lua, parsed ahead of this script (the burst is not used).
-- Returns {allowed, remaining, retry_after µs, reset_after µs}.

local w = math.floor(now / period)
local left = (w + 1) * period - now -- µs until the window ends

local count = 0
local h = redis.call("HMGET", KEYS[1], "w", "c")
if h[1] and tonumber(h[1]) == w then
	count = tonumber(h[2]) or 0
end

local avail = math.max(rate - count, 0)
local take = admit(avail)

if take == 0 then
	local retry = 0
	if n > 0 then
		retry = left -- the next window starts empty
	end
	local reset = 0
	if count > 0 then
		reset = left
	end
	return {0, avail, retry, reset}
end

if count == 0 then
	redis.call("HSET", KEYS[1], "w", string.format("%.0f", w), "c", take)
else
	redis.call("HINCRBY", KEYS[1], "c", take)
end
redis.call("PEXPIRE", KEYS[1], keepms(left))
return {take, avail - take, 0, left}
