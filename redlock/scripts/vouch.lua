-- Vouch for a node: declare that it holds every lock key it acknowledged (a
-- brand-new node), so that the restart quarantine does not apply to its
-- current run. A restart changes the run id and ends the vouching. A node
-- that shows it was in use is not vouched for: it may be the one that still
-- holds a lock that other nodes forgot.
-- KEYS[1] the node's quarantine marker. ARGV[1] "check" (only report) or
-- "vouch" (vouch unless the node shows it was in use).
-- Returns {vouched, why}: vouched is 1 when the node was already vouched for
-- in its current run, else 0; why is "" for a node that shows no sign of use,
-- else what it shows:
--   keys besides the marker, in any database (INFO keyspace, exact and O(1)):
--   lock keys, fence hashes (kept for at least an hour after a lock) or other
--   data, which a brand-new node does not have;
--   a marker vouched for an earlier run: the node restarted since.
local info = redis.call("INFO", "server")
local runid = string.match(info, "run_id:(%x+)")
local m = redis.call("HMGET", KEYS[1], "vouched", "ready_at")
local keys = 0
for n in string.gmatch(redis.call("INFO", "keyspace"), "db%d+:keys=(%d+)") do
	keys = keys + tonumber(n)
end
if m[1] or m[2] then
	keys = keys - 1 -- the marker itself
end
local why = ""
if keys > 0 then
	why = "it holds " .. keys .. " key(s) besides its marker (lock keys, fence hashes or other data)"
elseif m[1] and m[1] ~= runid then
	why = "it was vouched for in an earlier run (" .. m[1] .. "), so it restarted since"
end
local vouched = 0
if m[1] == runid then
	vouched = 1
end
if ARGV[1] == "vouch" and why == "" then
	local tm = redis.call("TIME")
	local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
	redis.call("HSET", KEYS[1], "vouched", runid, "ready_at", now)
	if not redis.call("HGET", KEYS[1], "id") then
		redis.call("HSET", KEYS[1], "id", tm[1] .. "." .. tm[2]) -- see quarantine.lua
	end
end
return {vouched, why}
