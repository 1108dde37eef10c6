-- The release's fast path, before release.lua's helpers are defined (each
-- call of a script runs its definitions): a plain release (no mode) that
-- finds nobody queued is a compare-and-delete. ARGV as release.lua's.
if not ARGV[5] then
	if redis.call("GET", KEYS[1]) ~= ARGV[1] then
		return 0
	end
	redis.call("DEL", KEYS[1])
	-- pcall: an ACL that does not reach the queue still releases.
	if ARGV[2] == "" or redis.pcall("ZCARD", ARGV[2]) == 0 then
		return 1
	end
end
