-- KEYS[1] holders (ZSET token -> expiry, server ms: a semaphore's, a
-- read-write lock's readers or writer), KEYS[2] fence key; ARGV[1] token,
-- ARGV[2] ttl ms, ARGV[3] fence key ttl ms (ttl + grace).
-- Extends our entry to now + ttl only if it is there and not expired, and
-- keeps the set and the fence key alive at least as long. Returns 1 or 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then
  return 0
end
if tonumber(expiry) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
keep(KEYS[1], now)
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
  redis.pcall('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
