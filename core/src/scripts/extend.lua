-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] fence key ttl ms (ttl + grace).
-- Resets the lock's TTL only if it holds our token, and the fence key's so
-- that it outlives the lock by the grace. Returns 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
