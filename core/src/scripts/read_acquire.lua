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
-- acquire.lua's hybrid logical clock; it and the sorted-set helpers come
-- from prelude/*.lua, prepended to this text (scripts.rs).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
-- ZREMRANGEBYSCORE fails with WRONGTYPE before anything is written.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
prune_line(KEYS[2], KEYS[3], now)
-- Our own read lock left over from a lost compensating release is ours.
if not redis.call('ZSCORE', KEYS[1], token) then
  if redis.call('ZCARD', KEYS[5]) > 0 then
    return {0, first_expiry(KEYS[5], now)}
  end
  if redis.call('ZCARD', KEYS[2]) > 0 then
    return {0, first_expiry(KEYS[3], now)}
  end
end
local fence = next_fence(KEYS[4], now)
if not fence then
  return unreadable_counter()
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), token)
keep(KEYS[1], now)
redis.call('SET', KEYS[4], fence, 'PX', math.max(redis.call('PTTL', KEYS[4]), tonumber(ARGV[3])))
return {1, fence}
