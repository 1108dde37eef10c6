-- Mark a claim done on one node: replace the lease's value in the lock key
-- by the done marker, kept for the retention. The marker lives in the lock
-- key itself, so the lock's own SET NX refuses the id from then on: a done
-- id can never be claimed again on this node, whatever happened to the
-- in-flight lease, for as long as the marker lives.
-- KEYS[1] the claim's lock key. ARGV[1] the lease's value; ARGV[2] the
-- marker; ARGV[3] retention in ms.
-- Returns 1 marked (also when this marker was already there: a repeated
-- call), 0 the key no longer holds the lease's value.
local v = redis.call("GET", KEYS[1])
if v == ARGV[1] or v == ARGV[2] then
	redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
	return 1
end
return 0
