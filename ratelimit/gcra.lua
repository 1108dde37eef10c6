-- GCRA (generic cell rate algorithm), the algorithm of go-redis/redis_rate:
-- one key holds the theoretical arrival time (TAT), the instant at which the
-- limiter would be back to full if nothing else came.
-- KEYS[1] state key.
-- ARGV as in args.lua, which parses them into rate, burst, period, n, most,
-- need and now, and defines admit, ahead of this script.
-- Returns {allowed, remaining, retry_after µs, reset_after µs}.
--
-- The TAT is stored as two doubles packed in 16 bytes (struct.pack "<d<d"):
-- whole µs since 1970, exact in a double below 2^53, and the fraction of a
-- µs. One double of µs since 1970 resolves only 1/4 µs, and rounding on
-- every request would pile up over a burst; packing costs no number
-- formatting or parsing. All arithmetic below is on tat - now, a small
-- number, so it keeps full precision.

local interval = period / rate -- µs between two requests at the steady rate
local capacity = interval * burst -- how far ahead of now the TAT may run
local slack = 1e-9 -- in requests: absorbs float rounding (far below 1µs)

-- rel = TAT - now; a missing key or a TAT in the past is a full limiter
local rel = 0
local v = redis.call("GET", KEYS[1])
if v and #v == 16 then
	local whole, frac = struct.unpack("<d<d", v)
	rel = (whole - now) + frac
	if rel < 0 then
		rel = 0
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
local whole = math.floor(new_rel)
redis.call("SET", KEYS[1], struct.pack("<d<d", now + whole, new_rel - whole), "PX", keepms(new_rel))
return {take, avail - take, 0, math.ceil(new_rel)}
