-- A fenced write: the protected resource refuses a stale lock holder.
-- KEYS[1] the user's hash (the resource; only this key is touched, so it may
-- live in any cluster slot); ARGV[1] the field holding the last accepted
-- fence, ARGV[2] the writer's fence (decimal u64), ARGV[3] field, ARGV[4] value.
-- Applied when the fence is not older than the last accepted one (equal: the
-- same holder writing again): sets the field and records the fence, in one
-- HSET. Returns {1, fence} when applied, {0, last accepted fence} when refused
-- (fences as decimal strings: Lua numbers are doubles). Decimals are compared
-- as (high, low) halves of at most 10 digits (prelude/decimal.lua, prepended
-- to this text by scripts.rs): exact.
if not decimal(ARGV[2]) then
  return redis.error_reply('ERR fence must be a decimal u64')
end
-- WRONGTYPE when the key holds something other than a hash: nothing written.
local last = redis.call('HGET', KEYS[1], ARGV[1])
if last then
  if not decimal(last) then
    return redis.error_reply('ERR the fence field of this key is not a decimal fence')
  end
  if less(split(ARGV[2]), split(last)) then
    return {0, last}
  end
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4], ARGV[1], ARGV[2])
return {1, ARGV[2]}
