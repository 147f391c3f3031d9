-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] fence key ttl ms (lock ttl + grace).
-- Returns {1, fence} when acquired, fence as a decimal string (a u64; Lua
-- numbers are doubles), or {0, holder's PTTL} when held.
--
-- The fence rule and its helpers (next_fence...) come from
-- prelude/decimal.lua and prelude/fence.lua, prepended to this text
-- (scripts.rs): the whole stands alone for EVALSHA.
local function grant()
  local fence = next_fence(KEYS[2])
  if not fence then
    -- A counter we cannot read or increment must not leave the lock held.
    redis.call('DEL', KEYS[1])
    return unreadable_counter()
  end
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
