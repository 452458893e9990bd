-- distlock history: read (a script of its own; changes nothing). KEYS: P{K}:history.
-- ARGV: 1 the first id to return ('-' for the oldest, '(ID' for after ID), 2 the most to return
-- (0: all), newest last. With a count, the newest that many from ARGV[1] on.
-- Returns the entries as XRANGE does: {id, {field, value, ...}}, ...
local from, count = ARGV[1], tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
if count and count > 0 then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', from, 'COUNT', count)
  local out = {}
  for i = #newest, 1, -1 do
    out[#out + 1] = newest[i]
  end
  return out
end
return redis.call('XRANGE', KEYS[1], from, '+')
