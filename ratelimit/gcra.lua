-- GCRA (generic cell rate algorithm), the algorithm of go-redis/redis_rate:
-- one key holds the theoretical arrival time (TAT), the instant at which the
-- limiter would be back to full if nothing else came.
-- KEYS[1] state key.
-- ARGV as in args.lua, which parses them into rate, burst, period, n, most,
-- need and now, and defines admit, ahead of this script.
-- Returns {allowed, remaining, retry_after µs, reset_after µs}.
--
-- The TAT is stored as "<seconds>:<µs and fraction>" (e.g.
-- "1764473535:123456.33333333"): a single double of µs since 1970 has a
-- resolution of 1/4 µs, and rounding on every request would pile up over a
-- burst. Both parts print exactly with Lua's number format (14 significant
-- digits: the µs part keeps 8 decimals). All arithmetic below is on
-- tat - now, a small number, so it keeps full precision.

local interval = period / rate -- µs between two requests at the steady rate
local capacity = interval * burst -- how far ahead of now the TAT may run
local slack = 1e-9 -- in requests: absorbs float rounding (far below 1µs)

-- rel = TAT - now; a missing key or a TAT in the past is a full limiter
local rel = 0
local v = redis.call("GET", KEYS[1])
if v then
	local i = string.find(v, ":", 1, true)
	if i then
		rel = (tonumber(string.sub(v, 1, i - 1)) * 1000000 - now) + tonumber(string.sub(v, i + 1))
		if rel < 0 then
			rel = 0
		end
	end
end

-- whole requests admissible right now
local avail = math.floor((capacity - rel) / interval + slack)
if avail < 0 then
	avail = 0
end

local take = admit(avail)

if take == 0 then
	local retry = 0
	if n > 0 then
		-- until the TAT has moved back far enough for the request to fit
		retry = math.ceil(rel + need * interval - capacity)
		if retry < 1 then
			retry = 1
		end
	end
	return {0, avail, retry, math.ceil(rel)}
end

local new_rel = rel + take * interval
-- now is a whole number of µs, so the split is exact
local whole = now + math.floor(new_rel)
local sec = math.floor(whole / 1000000)
redis.call("SET", KEYS[1], sec .. ":" .. (whole - sec * 1000000 + (new_rel - math.floor(new_rel))),
	"PX", keepms(new_rel))
return {take, avail - take, 0, math.ceil(new_rel)}
