-- KEYS[1] fence key; ARGV[1] fence (decimal u64), ARGV[2] fence key ttl ms.
-- Set-if-greater, so a Redlock fence is held by a majority before use.
-- Returns the counter afterwards as a decimal string. Exact: decimals are
-- compared as (high, low) halves of at most 10 digits (prelude/decimal.lua,
-- prepended to this text by scripts.rs).
if not decimal(ARGV[1]) then
  return redis.error_reply('ERR fence must be a decimal u64')
end
local current = redis.call('GET', KEYS[1])
if current and not decimal(current) then
  return redis.error_reply('ERR fence counter is not an integer')
end
if not current or less(split(current), split(ARGV[1])) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return current
