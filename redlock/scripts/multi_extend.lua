-- Extend a multi-key lease: set a fresh TTL on every lock key, only if every
-- one still holds our value; otherwise extend none. Never re-creates a
-- missing key (another client may have held it in the gap).
-- KEYS the lock keys; ARGV[1] our value; ARGV[2] TTL in milliseconds.
-- Returns 1 if extended, 0 otherwise.
for i = 1, #KEYS do
	if redis.call("GET", KEYS[i]) ~= ARGV[1] then
		return 0
	end
end
for i = 1, #KEYS do
	redis.call("PEXPIRE", KEYS[i], ARGV[2])
end
return 1
