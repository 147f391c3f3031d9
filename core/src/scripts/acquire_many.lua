-- Several mutexes at once, all or nothing: KEYS[2i-1] lock key and KEYS[2i]
-- fence key of the i-th name (all in one slot); ARGV[1] ttl ms, ARGV[2]
-- fence key ttl ms (lock ttl + grace), ARGV[2+i] the i-th lease's token.
-- Returns {1, fence_1, ..., fence_n} when every lock was free (or already
-- ours) and is now set, each fence issued as acquire.lua issues it (a
-- decimal string); or {0, pttl, i}: nothing written, the i-th lock is held
-- by someone else and has the longest remaining PTTL among the held ones
-- (-1: a key without expiry, the longest).
--
-- Fence rule and helpers as in acquire.lua: max(stored + 1, server ms *
-- 1024), decimals as (high, low) halves so every number stays exact.
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
local n = #KEYS / 2
-- First look only: a lock held by someone else leaves everything as it was.
-- GET fails with WRONGTYPE when a lock key is not a string, before any write.
local longest, at = nil, 0
for i = 1, n do
  local holder = redis.call('GET', KEYS[2 * i - 1])
  if holder and holder ~= ARGV[2 + i] then
    local pttl = redis.call('PTTL', KEYS[2 * i - 1])
    if at == 0 or (longest ~= -1 and (pttl == -1 or pttl > longest)) then
      longest, at = pttl, i
    end
  end
end
if at > 0 then
  return {0, longest, at}
end
-- Every next fence is computed before anything is written: a counter we
-- cannot read or increment refuses the whole set.
local t = redis.call('TIME')
-- Exact: below 2^53 until the year 2248.
local now = split(string.format('%.0f', (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024))
local fences = {}
for i = 1, n do
  local stored = redis.pcall('GET', KEYS[2 * i])
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
      return redis.error_reply('ERR fence counter is not an integer below 2^64-1')
    end
  end
  if not next or less(next, now) then
    next = now
  end
  fences[i] = joined(next)
end
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[2 + i], 'PX', ARGV[1])
  redis.call('SET', KEYS[2 * i], fences[i], 'PX', ARGV[2])
  reply[i + 1] = fences[i]
end
return reply
