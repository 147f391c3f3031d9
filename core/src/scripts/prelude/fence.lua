-- The fence counter (after decimal.lua). A fence is a hybrid logical
-- clock, max(stored + 1, server ms * 1024), so it keeps increasing when the
-- stored value is gone (expiry, a restart without persistence, a failover)
-- as long as the server clock does not step back.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- stored + 1 for a counter's GET reply (false: none): true and the
-- (high, low) halves (nil without a counter), or false when the counter is
-- not a decimal below 2^64-1, so it can be neither read nor incremented.
local function successor(stored)
  if not stored then
    return true, nil
  end
  local next = nil
  if decimal(stored) then
    next = split(stored)
    next[2] = next[2] + 1
    if next[2] == 1e10 then
      next = {next[1] + 1, 0}
    end
  end
  -- u64::MAX is 1844674407 3709551615.
  if not next or less({1844674407, 3709551615}, next) then
    return false
  end
  return true, next
end
local function unreadable_counter()
  return redis.error_reply('ERR fence counter is not an integer below 2^64-1')
end
-- The fence issued at server time ms after `next` (successor's halves, or
-- nil), as a decimal string. Exact: ms * 1024 is below 2^53 until the year
-- 2248.
local function fence_at(next, ms)
  local clock = split(string.format('%.0f', ms * 1024))
  if not next or less(next, clock) then
    next = clock
  end
  return joined(next)
end
-- The fence to issue from the counter at `key` (read with pcall: a key of
-- another type is unreadable too) at server time `now` (ms; nil: TIME is
-- read after the counter), or nil when the counter is unreadable.
-- Every acquire runs this, so the common counter, a decimal below 2^53 - 1
-- (16 digits at most; two of them compare as strings), is read and
-- incremented as one Lua number, exact in a double; the halves are for the
-- rest.
local function next_fence(key, now)
  local stored = redis.pcall('GET', key)
  if not stored or (type(stored) == 'string'
      and (#stored < 16 or (#stored == 16 and stored <= '9007199254740990'))
      and string.match(stored, '^%d+$')) then
    local fence = (now or server_ms()) * 1024
    if stored and tonumber(stored) + 1 > fence then
      fence = tonumber(stored) + 1
    end
    return string.format('%.0f', fence)
  end
  local ok, next = successor(stored)
  if not ok then
    return nil
  end
  return fence_at(next, now or server_ms())
end
-- A reclaim's set-if-greater: the counter at `key` becomes the lease's
-- fence (a decimal string) unless it already is at least that; an
-- unreadable counter is left as it is, its TTL refreshed all the same.
local function raise_to(key, fence, ttl)
  local current = redis.pcall('GET', key)
  if current == false or (decimal(current) and less(split(current), split(fence))) then
    redis.call('SET', key, fence, 'PX', ttl)
  else
    redis.pcall('PEXPIRE', key, ttl)
  end
end
