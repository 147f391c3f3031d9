-- KEYS[1] holders (ZSET token -> expiry, server ms: a semaphore's, a
-- read-write lock's readers or writer), KEYS[2] fence key; ARGV[1..n]
-- (optional) the tokens of the caller's own leases. Read-only.
-- Returns inspect.lua's {pttl, fence, ours}: how long until the last live
-- holder expires (-2 when none is left), the fence key's value (nil once
-- expired), and 1 if a live holder is one of ARGV. Tokens are never
-- returned.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local pttl = -2
if last[2] and tonumber(last[2]) > now then
  pttl = tonumber(last[2]) - now
end
local ours = 0
for i = 1, #ARGV do
  local expiry = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if expiry and tonumber(expiry) > now then
    ours = 1
  end
end
-- false (a missing fence key) is a nil reply, and keeps the array whole.
local fence = redis.call('GET', KEYS[2])
return {pttl, fence, ours}
