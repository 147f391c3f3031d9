-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] release channel; ARGV[1] our
-- token, ARGV[2] the next waiter's token, ARGV[3] its ttl ms, ARGV[4] its
-- fence key ttl ms (its ttl + grace); ARGV[5] (optional) 'SPUBLISH' on a
-- Redis Cluster.
-- A release that hands the lock straight to the next waiter of the same
-- client, in the same round trip: if the lock holds our token, it gets the
-- waiter's token with the waiter's ttl, and the next fence exactly as
-- acquire.lua issues it (max(stored + 1, server ms * 1024), the fence key
-- set with ARGV[4]). The lock is never free, so nobody is notified.
-- Only while nobody listens on the channel (PUBSUB NUMSUB, SHARDNUMSUB on a
-- cluster): a subscriber is another client's waiter, and it gets the lock
-- released as release.lua does (DEL, PUBLISH) and its fair chance, so a
-- busy client never starves other clients by handing the lock round its
-- own waiters. Also released that way when the fence counter cannot be
-- read (the waiter's own attempt then reports it) or PUBSUB is refused.
-- Returns {1, fence} handed over (fence a decimal string), {2, 1} released
-- and waiters woken, {2, 0} released but the PUBLISH was refused (an ACL
-- user without channel rights), {0, pttl} not ours: nothing changed.
-- The fence helpers (next_fence: the fence acquire.lua would issue now)
-- come from prelude/*.lua, prepended to this text (scripts.rs): the whole
-- stands alone for EVALSHA.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
local sharded = ARGV[5] == 'SPUBLISH'
local listeners = redis.pcall('PUBSUB', sharded and 'SHARDNUMSUB' or 'NUMSUB', KEYS[3])
local fence = nil
if type(listeners) == 'table' and not listeners.err and listeners[2] == 0 then
  fence = next_fence(KEYS[2])
end
if fence then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  redis.call('SET', KEYS[2], fence, 'PX', ARGV[4])
  return {1, fence}
end
redis.call('DEL', KEYS[1])
local published = redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', KEYS[3], '1')
if type(published) == 'table' and published.err then
  return {2, 0}
end
return {2, 1}
