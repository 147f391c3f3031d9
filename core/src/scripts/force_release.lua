-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] release channel; ARGV[1]
-- fence grace ms; ARGV[2] (optional) 'SPUBLISH' on a Redis Cluster.
-- An operator's force-release: deletes the lock whoever holds it, wakes its
-- waiters, and advances the fence as an acquire would, max(stored + 1,
-- server ms * 1024), so every fence issued before is stale from now on: a
-- fenced resource checking against this value refuses the old holder. The
-- fence key then lives for the old holder's remaining TTL plus the grace.
-- Returns {1 if a holder was removed else 0, the new fence as a decimal
-- string}. Nothing changes when the counter is unreadable (an error reply).
-- The fence helpers come from prelude/*.lua, prepended to this text
-- (scripts.rs): the whole stands alone for EVALSHA.
-- GET, not pcall: a fence key of another type fails the script as it is.
local ok, next = successor(redis.call('GET', KEYS[2]))
if not ok then
  return unreadable_counter()
end
local fence = fence_at(next, server_ms())
local pttl = redis.call('PTTL', KEYS[1])
local held = 0
if pttl ~= -2 then
  held = 1
  redis.call('DEL', KEYS[1])
  redis.pcall(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[3], '1')
end
redis.call('SET', KEYS[2], fence, 'PX', math.max(math.max(pttl, 0) + tonumber(ARGV[1]), 1))
return {held, fence}
