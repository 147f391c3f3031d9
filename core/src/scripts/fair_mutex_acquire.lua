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
-- that is not first takes (or refreshes) its place. The fence and line
-- helpers come from prelude/*.lua, prepended to this text (scripts.rs):
-- the whole stands alone for EVALSHA.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, patience = ARGV[1], tonumber(ARGV[4])
-- GET fails with WRONGTYPE (nothing written) when the lock key is not a string.
local holder = redis.call('GET', KEYS[1])
prune_line(KEYS[2], KEYS[3], now)
local function wait_in_line(hint)
  -- A try-once (patience 0) only looks: it takes no place.
  if patience > 0 then
    redis.call('ZADD', KEYS[2], 'NX', string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])), token)
    redis.call('ZADD', KEYS[3], string.format('%.0f', now + patience), token)
    -- Both sets live as long as their last expiry.
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local life = math.max(tonumber(last[2]) - now, 1)
    redis.call('PEXPIRE', KEYS[3], life)
    redis.call('PEXPIRE', KEYS[2], life)
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
    return wait_in_line(first_expiry(KEYS[3], now))
  end
end
local fence = next_fence(KEYS[4], now)
if not fence then
  return unreadable_counter()
end
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], token)
redis.call('ZREM', KEYS[3], token)
redis.call('SET', KEYS[4], fence, 'PX', ARGV[3])
return {1, fence}
