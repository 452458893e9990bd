-- distlock acquire.
-- KEYS[1]: the lock; KEYS[2]: its holder metadata hash (same hash tag, same expiry).
-- ARGV[1]: our token; ARGV[2]: TTL in ms; ARGV[3..]: holder metadata, field/value pairs.
-- Returns {1} when acquired, also when the lock already holds our token (an earlier attempt
-- whose reply was lost landed after all; both expiries are refreshed), or, when someone else
-- holds it, {0, pttl, now_ms, metadata} with the holder's remaining time in ms (-1 when the
-- holder set no expiry), the server's clock, and the holder's metadata as a flat array of
-- field/value pairs (empty for clients that store none).
-- The lock's value is the bare token: redis-py's Lock, redsync and node-redlock use the same
-- layout, so they exclude and are excluded by distlock on the same key.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local current = redis.call('GET', KEYS[1])
if current == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'acquired_at', now_ms(), unpack(ARGV, 3))
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {1}
end
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {1}
end
return {0, redis.call('PTTL', KEYS[1]), now_ms(), redis.call('HGETALL', KEYS[2])}
