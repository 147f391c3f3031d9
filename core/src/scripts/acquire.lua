-- KEYS[1] lock key, KEYS[2] fencing counter; ARGV[1] token, ARGV[2] ttl ms.
-- Returns {1, fence} when acquired, {0, holder's PTTL} when held.
local function grant()
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' and fence.err then
    -- A counter that is not an integer must not leave the lock held.
    redis.call('DEL', KEYS[1])
    return fence
  end
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
