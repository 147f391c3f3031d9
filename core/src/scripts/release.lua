-- KEYS[1] lock key, KEYS[2] (optional) release channel; ARGV[1] token;
-- ARGV[2] (optional) 'SPUBLISH' on a Redis Cluster: notify the channel's
-- shard only (sharded pub/sub), not every node.
-- Deletes the lock only if it holds our token, then wakes waiters. Without
-- KEYS[2] nobody is woken: a failed attempt's clean-up frees nothing anyone
-- waits for, and waking them would only make them retry in vain.
-- Returns 1 if released, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[2], '1')
  end
  return 1
end
return 0
