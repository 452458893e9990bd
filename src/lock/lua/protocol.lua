-- distlock: the key-layout protocol check, run first in every script but the renewal (before
-- common.lua), before anything is read or changed. The renewal goes without it: it extends only
-- a lock that holds its own token (which no lock of another layout does), and it must run on
-- the source of a Cluster slot migration, where reading a key that does not exist fails (see
-- 'Declared keys' in common.lua; the scripts with it declare all of a lock's keys, the marker
-- included, and never run there).
--
-- This client speaks protocol 1 (the layout described in common.lua). A client whose layout is
-- incompatible with it (a newer protocol N > 1) keeps the decimal string N in P{K}:protocol for
-- as long as any key of such a lock exists; protocol 1 never writes that key (absent means 1).
-- Meeting any other value than '1', every script refuses with the error reply
--   DISTLOCK-PROTOCOL <found> 1
-- so that this distlock never misreads a lock written in another layout, and never overwrites or
-- deletes it. The key is found by its name (the lock's key + ':protocol'), whatever its place
-- among the declared KEYS (the client also declares it, for Redis Cluster).
local protocol = redis.call('GET', string.match(KEYS[1], '^(.*})') .. ':protocol')
if protocol and protocol ~= '1' then
  return redis.error_reply(
    'DISTLOCK-PROTOCOL ' .. string.gsub(string.sub(protocol, 1, 20), '[^%w%.%-]', '?') .. ' 1')
end
