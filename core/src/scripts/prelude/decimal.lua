-- Decimal u64s (fences) as (high, low) halves of at most 10 digits, so
-- every number Lua sees stays exact (Lua numbers are doubles).
local function decimal(s)
  return type(s) == 'string' and string.match(s, '^%d+$') and #s <= 20
end
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
