-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] fence key ttl ms (lock ttl + grace).
-- Returns {1, fence} when acquired, fence as a decimal string (a u64; Lua
-- numbers are doubles), or {0, holder's PTTL} when held.
--
-- The fence is a hybrid logical clock, max(stored + 1, server ms * 1024), so
-- it keeps increasing when the stored value is gone (expiry, a restart
-- without persistence, a failover) as long as the server clock does not step
-- back. Decimals are handled as (high, low) halves of at most 10 digits:
-- every number Lua sees stays exact. (raise_fence.lua has the same helpers.)
local function split(s)
  local n = #s
  if n <= 10 then
    return {0, tonumber(s)}
  end
  return {tonumber(string.sub(s, 1, n - 10)), tonumber(string.sub(s, n - 9))}
end
local function less(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
local function joined(a)
  if a[1] == 0 then
    return string.format('%.0f', a[2])
  end
  return string.format('%.0f%010.0f', a[1], a[2])
end
local function grant()
  local stored = redis.pcall('GET', KEYS[2])
  local next = nil
  if stored then
    if type(stored) == 'string' and string.match(stored, '^%d+$') and #stored <= 20 then
      next = split(stored)
      next[2] = next[2] + 1
      if next[2] == 1e10 then
        next = {next[1] + 1, 0}
      end
    end
    -- u64::MAX is 1844674407 3709551615.
    if not next or less({1844674407, 3709551615}, next) then
      -- A counter we cannot read or increment must not leave the lock held.
      redis.call('DEL', KEYS[1])
      return redis.error_reply('ERR fence counter is not an integer below 2^64-1')
    end
  end
  local t = redis.call('TIME')
  -- Exact: below 2^53 until the year 2248.
  local now = split(string.format('%.0f', (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024))
  if not next or less(next, now) then
    next = now
  end
  local fence = joined(next)
  redis.call('SET', KEYS[2], fence, 'PX', ARGV[3])
  return {1, fence}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return grant()
end
-- GET fails with WRONGTYPE when the lock key is not a string. Our own token
-- is left over from an attempt whose compensating release was lost: it is
-- ours to take again.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return grant()
end
return {0, redis.call('PTTL', KEYS[1])}
