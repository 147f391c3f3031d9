-- KEYS[1] holders (ZSET: a semaphore's, a read-write lock's readers or
-- writer), KEYS[2] the line, KEYS[3] its expiries, KEYS[4] (optional) the
-- release channel; ARGV[1] token; ARGV[2] (optional) 'SPUBLISH' on a Redis
-- Cluster.
-- Removes our entry from the holders and from the line (an acquire that
-- gives up leaves it with this too), then wakes waiters if the channel is
-- given and a place was freed. Returns 1 if we held it, 2 if we held it but
-- the server refused the notification (an ACL user without channel
-- rights), 0 if we did not hold it. The fence key is left to expire.
local held = redis.call('ZREM', KEYS[1], ARGV[1])
local queued = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if KEYS[4] and held + queued > 0 then
  local published = redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[4], '1')
  if held == 1 and type(published) == 'table' and published.err then
    return 2
  end
end
return held
