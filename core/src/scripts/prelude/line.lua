-- Sorted sets scored by expiry (server ms): holders, and the fair line's
-- expiries (its order is a second set, scored by arrival).
-- Drops the places whose expiry has passed from the line and its expiries.
local function prune_line(line, expiries, now)
  local gone = redis.call('ZRANGEBYSCORE', expiries, '-inf', now)
  for i = 1, #gone do
    redis.call('ZREM', line, gone[i])
  end
  redis.call('ZREMRANGEBYSCORE', expiries, '-inf', now)
end
-- ms until the first entry expires (at least 1; 1 for an empty set).
local function first_expiry(key, now)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    return math.max(tonumber(first[2]) - now, 1)
  end
  return 1
end
-- A set lives as long as its last entry.
local function keep(key, now)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(tonumber(last[2]) - now, 1))
  end
end
