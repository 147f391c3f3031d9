-- KEYS[1] holders (ZSET token -> expiry, server ms), KEYS[2] fence key,
-- KEYS[3] (optional) a set that must be empty; ARGV[1] token, ARGV[2] ttl
-- ms, ARGV[3] the lease's fence (decimal u64), ARGV[4] fence key ttl ms,
-- ARGV[5] the most holders the set may have (0: no limit).
-- reclaim.lua for a semaphore permit or a read-write lock's side: sent only
-- while a majority of Redlock nodes still holds our entry, it puts it back
-- on a node that lost it, unless that would exceed the permits or meet the
-- other side (a writer where readers hold, a reader where a writer does),
-- and raises the node's fence counter to the lease's (set-if-greater).
-- Returns 1 if the node now holds our entry, else 0. The helpers come from
-- prelude/*.lua, prepended to this text (scripts.rs).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local limit = tonumber(ARGV[5])
  if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then
    return 0
  end
  if KEYS[3] then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    if redis.call('ZCARD', KEYS[3]) > 0 then
      return 0
    end
  end
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
keep(KEYS[1], now)
raise_to(KEYS[2], ARGV[3], ARGV[4])
return 1
