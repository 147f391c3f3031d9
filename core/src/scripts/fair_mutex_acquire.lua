-- KEYS[1] lock key (the mutex's string key), KEYS[2] the line (ZSET token
-- -> arrival, server µs), KEYS[3] each waiter's expiry (ZSET, ms), KEYS[4]
-- fence key; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] fence key ttl ms (ttl
-- + grace), ARGV[4] how long a place in the line lasts without a new
-- attempt (ms; 0: a try-once, which never takes a place).
-- Returns {1, fence} when acquired (fence a decimal string), or {0, ms}:
-- the holder's PTTL, or when the first waiter's place expires.
--
-- The fair mutex: acquire.lua's lock key, token and fence, so a plain
-- acquire of the same name still excludes it (and may take a free lock
-- ahead of the line: acquire.lua does not look at it). Waiters line up as
-- in fair_acquire.lua (the same two sorted sets, pruned the same way): a
-- free lock goes to the first live waiter in arrival order; an attempt
-- that is not first takes (or refreshes) its place. The fence helpers are
-- acquire.lua's: every script is self-contained for EVALSHA.
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
local token, patience = ARGV[1], tonumber(ARGV[4])
-- GET fails with WRONGTYPE (nothing written) when the lock key is not a string.
local holder = redis.call('GET', KEYS[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for i = 1, #gone do
  redis.call('ZREM', KEYS[2], gone[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local function wait_in_line(hint)
  -- A try-once (patience 0) only looks: it takes no place.
  if patience > 0 then
    redis.call('ZADD', KEYS[2], 'NX', string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])), token)
    redis.call('ZADD', KEYS[3], string.format('%.0f', now + patience), token)
    -- Both sets live as long as their last expiry.
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local keep = math.max(tonumber(last[2]) - now, 1)
    redis.call('PEXPIRE', KEYS[3], keep)
    redis.call('PEXPIRE', KEYS[2], keep)
  end
  return {0, hint}
end
-- Our own token is left over from an attempt whose compensating release
-- was lost: ours to take again.
if holder and holder ~= token then
  return wait_in_line(redis.call('PTTL', KEYS[1]))
end
if not holder then
  local ahead = redis.call('ZRANK', KEYS[2], token) or redis.call('ZCARD', KEYS[2])
  if ahead > 0 then
    -- Free, but the first waiter's: it takes it, leaves, or its place expires.
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    return wait_in_line(first[2] and math.max(tonumber(first[2]) - now, 1) or 1)
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
-- Exact: below 2^53 until the year 2248.
local clock = split(string.format('%.0f', now * 1024))
if not next or less(next, clock) then
  next = clock
end
local fence = joined(next)
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], token)
redis.call('ZREM', KEYS[3], token)
redis.call('SET', KEYS[4], fence, 'PX', ARGV[3])
return {1, fence}
