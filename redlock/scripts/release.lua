-- Compare-and-delete, and the hand-over to the next waiter (release_fast.lua,
-- quarantine.lua and queue.lua are put in front; a plain release, without a
-- mode, that gets here has deleted the key already). The key is deleted only if it still
-- holds our value; then, when waiters are queued and the node may vote (the
-- restart quarantine), the first one that has not lapsed is granted the key
-- in the same step and told on the release channel.
-- KEYS[1] lock key; KEYS[2] the node's marker (with the quarantine on).
-- ARGV[1] our value; ARGV[2] the queue's key ("": no queue); ARGV[3] the
-- release channel; ARGV[4] quarantine in ms (0: off); ARGV[5] the mode:
-- "release"; "leave", a waiter that gives up; "yield", a waiter that hands
-- a grant on and waits on (it is queued again: ARGV[7] round, ARGV[8] TTL
-- in ms, ARGV[9] the entry's life in ms, ARGV[10] its client's name); none
-- for a plain release. ARGV[6], the ticket of a waiter or of a lease made
-- of grants: its entry leaves the queue.
-- Returns 1 if our value was deleted, 0 otherwise.
local k, v, q, mode = KEYS[1], ARGV[1], ARGV[2], ARGV[5]
if mode then
	if redis.call("GET", k) ~= v then
		if ARGV[6] and mode ~= "yield" then
			pcall(function()
				local m = mine(q, tonumber(ARGV[6]), v)
				if m then
					redis.call("ZREM", q, m)
				end
			end)
		end
		return 0
	end
	redis.call("DEL", k)
	if q == "" then
		return 1
	end
end
-- pcall: a user whose ACL does not reach the queue still releases (its
-- waiters poll).
pcall(function()
	if redis.call("ZCARD", q) == 0 and mode ~= "yield" then
		return
	end
	local now = nowms()
	if mode == "yield" then
		enqueue(q, tonumber(ARGV[6]), v, ARGV[7], ARGV[8], tonumber(ARGV[9]), now, ARGV[10])
	elseif ARGV[6] then
		-- A lease or a waiter that leaves: its entry, if any is left here,
		-- goes too (a lease made of grants keeps the entries of the nodes
		-- that had not granted it).
		local m = mine(q, tonumber(ARGV[6]), v)
		if m then
			redis.call("ZREM", q, m)
		end
	end
	if quarantine(KEYS[2], tonumber(ARGV[4])) then
		return -- the node may not vote: the waiters find it so themselves
	end
	local h = head(q, now)
	if h then
		give(k, q, h, ARGV[3])
	end
end)
return 1
