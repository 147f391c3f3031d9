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
-- The exact (high, low) decimal helpers are acquire.lua's: every script is
-- self-contained, so EVALSHA needs nothing else loaded.
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
local function joined(a)
  if a[1] == 0 then
    return string.format('%.0f', a[2])
  end
  return string.format('%.0f%010.0f', a[1], a[2])
end
-- The fence acquire.lua would issue now, or nil if the counter is unreadable.
local function next_fence()
  local stored = redis.pcall('GET', KEYS[2])
  local next = nil
  if stored then
    if type(stored) == 'string' and string.match(stored, '^%d+$') and #stored <= 20 then
      next = split(stored)
      next[2] = next[2] + 1
      if next[2] == 1e10 then
        next = {next[1] + 1, 0}
      end
    end
    if not next or less({1844674407, 3709551615}, next) then
      return nil
    end
  end
  local t = redis.call('TIME')
  local now = split(string.format('%.0f', (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024))
  if not next or less(next, now) then
    next = now
  end
  return joined(next)
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
local sharded = ARGV[5] == 'SPUBLISH'
local listeners = redis.pcall('PUBSUB', sharded and 'SHARDNUMSUB' or 'NUMSUB', KEYS[3])
local fence = nil
if type(listeners) == 'table' and not listeners.err and listeners[2] == 0 then
  fence = next_fence()
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
