-- distlock acquire: take the lock KEYS[1] for token ARGV[1] with a TTL of ARGV[2] ms.
-- Returns {1} when acquired, also when the key already holds our token (an earlier attempt
-- whose reply was lost landed after all; its TTL is refreshed), or {0, pttl} with the holder's
-- remaining time in ms (-1 when the holder set no expiry).
-- The value is the bare token: redis-py's Lock, redsync and node-redlock use the same layout,
-- so they exclude and are excluded by distlock on the same key.
local current = redis.call('GET', KEYS[1])
if current == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
return {0, redis.call('PTTL', KEYS[1])}
