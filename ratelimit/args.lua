-- The arguments of every limiter script; scripts.go puts this in front of
-- each one (gcra.lua, fixed.lua, sliding.lua).
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
