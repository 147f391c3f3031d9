-- KEYS[1] holders (ZSET token -> expiry, server ms), KEYS[2] the line
-- (ZSET token -> arrival, server µs), KEYS[3] each waiter's expiry (ZSET,
-- ms), KEYS[4] fence key, KEYS[5] (optional) a set that must be empty;
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] fence key ttl ms (ttl + grace),
-- ARGV[4] permits, ARGV[5] how long a place in the line lasts without a
-- new attempt (ms; 0: a try-once, which never takes a place).
-- Returns {1, fence} when a permit is granted (fence a decimal string), or
-- {0, ms} with a hint of when to try again.
--
-- A semaphore's acquire (KEYS[1] its holders), and a read-write lock's
-- write (KEYS[1] the writer, one permit, KEYS[5] the readers: a writer
-- waits for them to leave, and holds new ones off while it waits, see
-- read_acquire.lua).
-- Fair: permits go to the waiters in arrival order. An attempt is granted
-- when the permits free now cover everyone ahead of it in the line and
-- itself; otherwise it takes (or keeps, refreshed) its place. Expired
-- holders and waiters are pruned first, so a crashed one blocks nobody past
-- its expiry. The fence is acquire.lua's hybrid logical clock; it and the
-- sorted-set helpers come from prelude/*.lua, prepended to this text
-- (scripts.rs): the whole stands alone for EVALSHA.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, ttl, permits = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
-- ZREMRANGEBYSCORE fails with WRONGTYPE before anything is written.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
prune_line(KEYS[2], KEYS[3], now)
local blockers = 0
if KEYS[5] then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  blockers = redis.call('ZCARD', KEYS[5])
end
local function grant()
  local fence = next_fence(KEYS[4], now)
  if not fence then
    return unreadable_counter()
  end
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), token)
  redis.call('ZREM', KEYS[2], token)
  redis.call('ZREM', KEYS[3], token)
  keep(KEYS[1], now)
  redis.call('SET', KEYS[4], fence, 'PX', math.max(redis.call('PTTL', KEYS[4]), tonumber(ARGV[3])))
  return {1, fence}
end
-- Our own permit, left over from an attempt whose compensating release
-- was lost: ours to take again.
if redis.call('ZSCORE', KEYS[1], token) then
  return grant()
end
local held = redis.call('ZCARD', KEYS[1])
local place = redis.call('ZRANK', KEYS[2], token)
local ahead = place or redis.call('ZCARD', KEYS[2])
if blockers == 0 and held + ahead < permits then
  return grant()
end
-- A try-once (patience 0) only looks: it takes no place.
if tonumber(ARGV[5]) > 0 then
  if not place then
    redis.call('ZADD', KEYS[2], string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])), token)
  end
  redis.call('ZADD', KEYS[3], string.format('%.0f', now + tonumber(ARGV[5])), token)
  keep(KEYS[3], now)
  -- The line's order lives as long as its expiries.
  redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[3]))
end
if held >= permits then
  -- Every permit is taken: the first one expires then (a release wakes us sooner).
  return {0, first_expiry(KEYS[1], now)}
end
if blockers > 0 then
  return {0, first_expiry(KEYS[5], now)}
end
-- A permit is free but goes to a waiter ahead: it takes it or leaves the line.
return {0, first_expiry(KEYS[3], now)}
