-- KEYS[1] lock key, KEYS[2] the line, KEYS[3] its expiries, KEYS[4]
-- (optional) the release channel; ARGV[1] token; ARGV[2] (optional)
-- 'SPUBLISH' on a Redis Cluster.
-- release.lua for a fair mutex's lease: deletes the lock only if it holds
-- our token, and takes our place out of the line (an acquire that gives up
-- leaves it with this too); then wakes waiters if the channel is given and
-- either freed something (the next in line may take a free lock now).
-- Returns 1 if released, 2 if released but the server refused the
-- notification (an ACL user without channel rights), 0 if the lock was
-- not ours. The fence key is left to expire by its TTL.
local held = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  held = 1
end
local queued = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if KEYS[4] and held + queued > 0 then
  local published = redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[4], '1')
  if held == 1 and type(published) == 'table' and published.err then
    return 2
  end
end
return held
