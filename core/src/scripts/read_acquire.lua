-- KEYS[1] readers (ZSET token -> expiry, server ms), KEYS[2] the writers'
-- line (ZSET token -> arrival, server µs), KEYS[3] each waiting writer's
-- expiry (ZSET, ms), KEYS[4] fence key, KEYS[5] the writer (ZSET, at most
-- one); ARGV[1] token, ARGV[2] ttl ms, ARGV[3] fence key ttl ms.
-- Returns {1, fence} when the read lock is granted, or {0, ms} with a hint
-- of when to try again.
--
-- Readers share: granted while no writer holds the lock AND no writer waits
-- for it. Writer preference: a waiting writer holds new readers off, so the
-- readers holding it drain and the writer never starves. Readers do not
-- queue themselves. Expired entries are pruned first (a crashed writer or
-- waiting writer blocks readers only until its expiry). The fence is
-- acquire.lua's hybrid logical clock, as in fair_acquire.lua.
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local function first_expiry(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    return math.max(tonumber(first[2]) - now, 1)
  end
  return 1
end
-- ZREMRANGEBYSCORE fails with WRONGTYPE before anything is written.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for i = 1, #gone do
  redis.call('ZREM', KEYS[2], gone[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
-- Our own read lock left over from a lost compensating release is ours.
if not redis.call('ZSCORE', KEYS[1], token) then
  if redis.call('ZCARD', KEYS[5]) > 0 then
    return {0, first_expiry(KEYS[5])}
  end
  if redis.call('ZCARD', KEYS[2]) > 0 then
    return {0, first_expiry(KEYS[3])}
  end
end
local stored = redis.pcall('GET', KEYS[4])
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
local clock = split(string.format('%.0f', now * 1024))
if not next or less(next, clock) then
  next = clock
end
local fence = joined(next)
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), token)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(last[2]) - now, 1))
redis.call('SET', KEYS[4], fence, 'PX', math.max(redis.call('PTTL', KEYS[4]), tonumber(ARGV[3])))
return {1, fence}
