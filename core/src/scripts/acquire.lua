-- KEYS[1] lock key, KEYS[2] fencing counter; ARGV[1] token, ARGV[2] ttl ms.
-- Returns {1, fence} when acquired, {0, holder's PTTL} when held.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' and fence.err then
    -- A counter that is not an integer must not leave the lock held.
    redis.call('DEL', KEYS[1])
    return fence
  end
  return {1, fence}
end
-- STRLEN fails with WRONGTYPE when the lock key is not a string.
redis.call('STRLEN', KEYS[1])
return {0, redis.call('PTTL', KEYS[1])}
