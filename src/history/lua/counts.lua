-- distlock history: counts (a script of its own; changes nothing). KEYS: P{K}:history:held.
-- Returns the hash as HGETALL does: the caller keeps the counters ('_n:', '_wait', '_hold',
-- '_ok_ms', see lock/lua/history.lua) and ignores the rest.
return redis.call('HGETALL', KEYS[1])
