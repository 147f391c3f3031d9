-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] the lease's fence (decimal u64), ARGV[4] fence key ttl ms.
-- Sent only while a majority of Redlock nodes still holds our token: puts
-- our key back on a node that lost it (a restart without persistence), so a
-- rolling restart never loses a renewed lease. Never takes a key that
-- someone else holds. Also raises the node's fence counter to the lease's
-- (set-if-greater, as raise_fence.lua). Returns 1 if the node now holds our
-- token, else 0.
local function split(s)
  local n = #s
  if n <= 10 then
    return {0, tonumber(s)}
  end
  return {tonumber(string.sub(s, 1, n - 10)), tonumber(string.sub(s, n - 9))}
end
local function less(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local current = redis.pcall('GET', KEYS[2])
if current == false or (type(current) == 'string' and string.match(current, '^%d+$')
    and #current <= 20 and less(split(current), split(ARGV[3]))) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
else
  redis.pcall('PEXPIRE', KEYS[2], ARGV[4])
end
return 1
