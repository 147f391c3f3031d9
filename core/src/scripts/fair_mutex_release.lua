-- KEYS[1] lock key, KEYS[2] the line, KEYS[3] its expiries, KEYS[4]
-- (optional) the release channel; ARGV[1] token; ARGV[2] (optional)
-- 'SPUBLISH' on a Redis Cluster.
-- release.lua for a fair mutex's lease: deletes the lock only if it holds
-- our token, and takes our place out of the line (an acquire that gives up
-- leaves it with this too); then, if the channel is given and either freed
-- something, wakes the first live waiter in the line, the one a free lock
-- is for: it publishes that waiter's wake id, the SHA-1 of its token in hex
-- (never the token), so the others keep waiting on their timers instead
-- of all asking at once; '1' (everyone) when the line is empty.
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
  -- Expired places go first, as fair_mutex_acquire.lua prunes them.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  prune_line(KEYS[2], KEYS[3], now)
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  local message = first and redis.sha1hex(first) or '1'
  local published = redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[4], message)
  if held == 1 and type(published) == 'table' and published.err then
    return 2
  end
end
return held
