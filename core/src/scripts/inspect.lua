-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1..n] (optional) the tokens of
-- the caller's own leases of this lock. Read-only.
-- Returns {pttl, fence, ours}: the lock key's PTTL (-2 when free), the fence
-- key's value (the last fence issued, a decimal string, or nil once it has
-- expired) and 1 if the lock key holds one of ARGV, else 0. The value itself
-- is never returned: it is the holder's token.
local pttl = redis.call('PTTL', KEYS[1])
local ours = 0
if pttl ~= -2 and #ARGV > 0 then
  local value = redis.call('GET', KEYS[1])
  for i = 1, #ARGV do
    if value == ARGV[i] then
      ours = 1
    end
  end
end
-- false (a missing fence key) is a nil reply, and keeps the array whole.
local fence = redis.call('GET', KEYS[2])
return {pttl, fence, ours}
