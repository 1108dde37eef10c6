-- Record who leads, next to the election's lock, only while the lock key
-- holds the leader's lease value (compare and set).
-- KEYS[1] the election's lock key; KEYS[2] its info hash (same hash slot).
-- ARGV[1] the lease's value; ARGV[2] identity; ARGV[3] epoch (fencing
-- token); ARGV[4] since, Unix ms by the leader's clock.
-- Returns 1 recorded, 0 the lock key does not hold the lease's value.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("HSET", KEYS[2], "value", ARGV[1], "identity", ARGV[2], "epoch", ARGV[3], "since", ARGV[4])
return 1
