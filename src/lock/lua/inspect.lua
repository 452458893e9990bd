-- distlock inspect (read-only): the lock KEYS[1] and its metadata KEYS[2].
-- Returns {token or false, pttl, now_ms, metadata}: the holder's token (false when free), its
-- remaining time in ms, the server's clock, and the metadata as field/value pairs.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), now, redis.call('HGETALL', KEYS[2])}
