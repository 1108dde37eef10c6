-- Release a read lease on one node (rw.lua is put in front): remove our
-- value, and no other (but the readers whose expiry has come), then let the
-- lock key and the set end with the last reader left (flag). KEYS[1] lock
-- key; KEYS[2] readers' set; ARGV[1] our value. Returns 1 if our value was
-- there unexpired, 0 otherwise.
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", rwnow())
local n = redis.call("ZREM", KEYS[2], ARGV[1])
flag(KEYS[1], KEYS[2])
return n
