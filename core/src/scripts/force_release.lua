-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] release channel; ARGV[1]
-- fence grace ms; ARGV[2] (optional) 'SPUBLISH' on a Redis Cluster.
-- An operator's force-release: deletes the lock whoever holds it, wakes its
-- waiters, and advances the fence as an acquire would, max(stored + 1,
-- server ms * 1024), so every fence issued before is stale from now on: a
-- fenced resource checking against this value refuses the old holder. The
-- fence key then lives for the old holder's remaining TTL plus the grace.
-- Returns {1 if a holder was removed else 0, the new fence as a decimal
-- string}. Nothing changes when the counter is unreadable (an error reply).
-- The exact (high, low) decimal helpers are acquire.lua's: every script is
-- self-contained, so EVALSHA needs nothing else loaded.
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
local stored = redis.call('GET', KEYS[2])
local next = nil
if stored then
  if string.match(stored, '^%d+$') and #stored <= 20 then
    next = split(stored)
    next[2] = next[2] + 1
    if next[2] == 1e10 then
      next = {next[1] + 1, 0}
    end
  end
  if not next or less({1844674407, 3709551615}, next) then
    return redis.error_reply('ERR fence counter is not an integer below 2^64-1')
  end
end
local t = redis.call('TIME')
local now = split(string.format('%.0f', (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024))
if not next or less(next, now) then
  next = now
end
local fence = joined(next)
local pttl = redis.call('PTTL', KEYS[1])
local held = 0
if pttl ~= -2 then
  held = 1
  redis.call('DEL', KEYS[1])
  redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[3], '1')
end
redis.call('SET', KEYS[2], fence, 'PX', math.max(math.max(pttl, 0) + tonumber(ARGV[1]), 1))
return {held, fence}
