-- KEYS[1] lock key, KEYS[2] release channel; ARGV[1] token.
-- Deletes the lock only if it holds our token, then wakes waiters.
-- Returns 1 if released, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], '1')
  return 1
end
return 0
