-- Extend: set a fresh TTL only if the key still holds our value. Never
-- re-creates a missing key (another client may have held it in the gap).
-- KEYS[1] lock key; ARGV[1] our value; ARGV[2] TTL in milliseconds.
-- Returns 1 if extended, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
