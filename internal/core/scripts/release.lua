-- Compare-and-delete: remove the lock key only if it still holds our value.
-- KEYS[1] lock key; ARGV[1] our value. Returns 1 if deleted, 0 otherwise.
-- With ARGV[2] (a channel) and ARGV[3] (a message), a deletion is announced
-- with PUBLISH, so that waiters elsewhere can retry at once. pcall: a user
-- without permission for the channel still releases (waiters then poll).
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1])
	if ARGV[2] then
		redis.pcall("PUBLISH", ARGV[2], ARGV[3])
	end
	return 1
end
return 0
