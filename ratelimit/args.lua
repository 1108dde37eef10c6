-- The arguments of every limiter script, and the admission rule they share;
-- scripts.go puts this in front of each one (gcra.lua, fixed.lua,
-- sliding.lua).
-- ARGV[1] rate; ARGV[2] burst (GCRA only); ARGV[3] period in µs; ARGV[4] n;
-- ARGV[5] "all" (AllowN: all n or none) or "most" (AllowAtMost);
-- ARGV[6] now in µs, "0" for the server's clock (TIME; tests pin it).
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local most = ARGV[5] == "most"
local now
if ARGV[6] == "0" then
	local t = redis.call("TIME")
	now = t[1] * 1000000 + t[2]
else
	now = tonumber(ARGV[6])
end

-- keepms is how long, in ms, a key holding state that matters for us more
-- µs of the limiter's clock is kept. The server's clock expires it; a
-- pinned clock (tests) does not move with the server's, so there the key is
-- kept a minute longer, until the test has moved its clock on: the state
-- itself says when it stops mattering (a window number, a TAT, timestamps).
local function keepms(us)
	local ms = math.max(1, math.ceil(us / 1000))
	if ARGV[6] ~= "0" then
		ms = ms + 60000
	end
	return ms
end

-- need is how many requests must fit for the call to admit any: all n for
-- AllowN, one for AllowAtMost.
local need = n
if most then
	need = 1
end

-- admit returns how many of the n requests to take when avail fit: n or 0
-- for AllowN, as many as fit for AllowAtMost.
local function admit(avail)
	if most then
		return math.min(n, avail)
	elseif n > avail then
		return 0
	end
	return n
end
