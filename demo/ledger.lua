-- The fenced ledger: accepts a job's write only if its fencing token is not
-- older than the last one accepted for that resource.
-- KEYS[1] hash resource -> last accepted fence, KEYS[2] hash job -> worker,
-- KEYS[3] hash of counters, KEYS[4] list of accepted writes (the history)
-- ARGV[1] resource, ARGV[2] fence, ARGV[3] job, ARGV[4] worker,
-- ARGV[5] 'unfenced' to skip the check (DEMO_UNFENCED=1: see what breaks)
-- Returns {1, fence} when accepted, {0, last fence} when rejected as stale.
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) < last and ARGV[5] ~= 'unfenced' then
  redis.call('HINCRBY', KEYS[3], 'stale', 1)
  return {0, last}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('HSETNX', KEYS[2], ARGV[3], ARGV[4]) == 0 then
  redis.call('HINCRBY', KEYS[3], 'double', 1)
end
redis.call('HINCRBY', KEYS[3], 'accepted', 1)
redis.call('RPUSH', KEYS[4], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
return {1, tonumber(ARGV[2])}
