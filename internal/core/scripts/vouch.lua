-- Vouch for a node: declare that it holds every lock key it acknowledged (a
-- brand-new node, or one an operator has checked), so that the restart
-- quarantine does not apply to its current run. A restart changes the run id
-- and ends the vouching.
-- KEYS[1] the node's quarantine marker. Returns the run id.
local info = redis.call("INFO", "server")
local runid = string.match(info, "run_id:(%x+)")
local tm = redis.call("TIME")
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
redis.call("HSET", KEYS[1], "vouched", runid, "ready_at", now)
return runid
