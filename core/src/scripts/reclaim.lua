-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] the lease's fence (decimal u64), ARGV[4] fence key ttl ms.
-- Sent only while a majority of Redlock nodes still holds our token: puts
-- our key back on a node that lost it (a restart without persistence), so a
-- rolling restart never loses a renewed lease. Never takes a key that
-- someone else holds. Also raises the node's fence counter to the lease's
-- (set-if-greater, as raise_fence.lua). Returns 1 if the node now holds our
-- token, else 0. The helpers come from prelude/*.lua, prepended to this
-- text (scripts.rs).
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
raise_to(KEYS[2], ARGV[3], ARGV[4])
return 1
