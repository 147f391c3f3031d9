-- KEYS[1] fencing counter; ARGV[1] fence.
-- Set-if-greater, so a Redlock fence is held by a majority before use.
-- Returns the counter's value afterwards.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
  redis.call('SET', KEYS[1], ARGV[1])
  return wanted
end
return current
