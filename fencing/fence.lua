-- fence.lua: the fencing check and, optionally, the protected write, as one
-- atomic step (Redis runs a script without interleaving other commands).
--
-- KEYS[1]  fence key: the highest accepted token, as a decimal string; no TTL
-- KEYS[2]  optional data key, written only if the token is accepted
-- ARGV[1]  the token: decimal, no leading zeros, greater than 0
-- ARGV[2]  the value to store at KEYS[2]
-- ARGV[3]  TTL of KEYS[2] in milliseconds; "0" means no expiry
--
-- Returns {1, token} if the token is accepted (it is >= the fence; the fence
-- is raised to it if lower), {0, current} if it is stale.
--
-- Tokens are compared as decimal strings, not as Lua numbers: Lua numbers are
-- doubles, exact only up to 2^53, and tokens are 64-bit.

local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

local MAX = '18446744073709551615' -- 2^64 - 1

local function is_token(s)
  return #s <= #MAX and string.match(s, '^[1-9][0-9]*$') ~= nil and not less(MAX, s)
end

local t = ARGV[1]
if not is_token(t) then
  return redis.error_reply('fencing: invalid token argument')
end

local cur = redis.call('GET', KEYS[1])
if cur then
  if not is_token(cur) then
    return redis.error_reply('fencing: fence key ' .. KEYS[1] .. ' holds a value that is not a token')
  end
  if less(t, cur) then
    return {0, cur}
  end
end
if not cur or less(cur, t) then
  redis.call('SET', KEYS[1], t)
end

if #KEYS == 2 then
  if ARGV[3] ~= '0' then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  else
    redis.call('SET', KEYS[2], ARGV[2])
  end
end
return {1, t}
