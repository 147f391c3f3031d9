-- Several mutexes at once, all or nothing: KEYS[2i-1] lock key and KEYS[2i]
-- fence key of the i-th name (all in one slot); ARGV[1] ttl ms, ARGV[2]
-- fence key ttl ms (lock ttl + grace), ARGV[2+i] the i-th lease's token.
-- Returns {1, fence_1, ..., fence_n} when every lock was free (or already
-- ours) and is now set, each fence issued as acquire.lua issues it (a
-- decimal string); or {0, pttl, i}: nothing written, the i-th lock is held
-- by someone else and has the longest remaining PTTL among the held ones
-- (-1: a key without expiry, the longest).
--
-- Fence rule and helpers as in acquire.lua (prelude/fence.lua).
local n = #KEYS / 2
-- First look only: a lock held by someone else leaves everything as it was.
-- GET fails with WRONGTYPE when a lock key is not a string, before any write.
local longest, at = nil, 0
for i = 1, n do
  local holder = redis.call('GET', KEYS[2 * i - 1])
  if holder and holder ~= ARGV[2 + i] then
    local pttl = redis.call('PTTL', KEYS[2 * i - 1])
    if at == 0 or (longest ~= -1 and (pttl == -1 or pttl > longest)) then
      longest, at = pttl, i
    end
  end
end
if at > 0 then
  return {0, longest, at}
end
-- Every next fence is computed before anything is written: a counter we
-- cannot read or increment refuses the whole set.
local now = server_ms()
local fences = {}
for i = 1, n do
  fences[i] = next_fence(KEYS[2 * i], now)
  if not fences[i] then
    return unreadable_counter()
  end
end
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[2 + i], 'PX', ARGV[1])
  redis.call('SET', KEYS[2 * i], fences[i], 'PX', ARGV[2])
  reply[i + 1] = fences[i]
end
return reply
