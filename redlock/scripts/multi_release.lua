-- Compare-and-delete over a multi-key lease: delete each lock key that still
-- holds our value, and no other. KEYS the lock keys; ARGV[1] our value.
-- Returns 1 if every key held our value (all deleted), 0 otherwise.
local all = 1
for i = 1, #KEYS do
	if redis.call("GET", KEYS[i]) == ARGV[1] then
		redis.call("DEL", KEYS[i])
	else
		all = 0
	end
end
return all
