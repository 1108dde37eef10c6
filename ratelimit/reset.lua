-- Reset: forget a key's state. KEYS: the state keys of one limiter key.
-- Returns how many keys existed.
return redis.call("DEL", unpack(KEYS))
