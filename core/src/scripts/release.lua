-- KEYS[1] lock key, KEYS[2] (optional) release channel; ARGV[1] token;
-- ARGV[2] (optional) 'SPUBLISH' on a Redis Cluster: notify the channel's
-- shard only (sharded pub/sub), not every node.
-- Deletes the lock only if it holds our token, then wakes waiters. Without
-- KEYS[2] nobody is woken: a failed attempt's clean-up frees nothing anyone
-- waits for, and waking them would only make them retry in vain.
-- Returns 1 if released, 2 if released but the server refused the
-- notification (an ACL user without channel rights: waiters fall back to
-- their timers), 0 if the lock was not ours. The fence key is left to
-- expire by its TTL.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    local published = redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[2], '1')
    if type(published) == 'table' and published.err then
      return 2
    end
  end
  return 1
end
return 0
