-- Identify a node when a Client is built: return its run id, or "" when the
-- user may not run INFO. That the script runs at all shows that the user may
-- run scripts (EVALSHA, then EVAL on a node that does not have it cached),
-- which every lease's extend and release need.
local info = redis.pcall("INFO", "server")
if type(info) ~= "string" then
	return ""
end
return string.match(info, "run_id:(%x+)") or ""
