-- distlock: the key-layout protocol check, run first in every script but the renewal (before
-- common.lua), before anything is read or changed. The renewal goes without it: it extends only
-- a lock that holds its own token (which no lock of another layout does), and it must run on
-- the source of a Cluster slot migration, where reading a key that does not exist fails (see
-- 'Declared keys' in common.lua; the scripts with it declare all of a lock's keys, the marker
-- included, and never run there).
--
-- This client speaks protocol 2: the layout described in common.lua, which is protocol 1's plus
-- shared (reader/writer) locks. Protocol 1 never writes P{K}:protocol (absent means 1). This
-- layout writes '2' there only while a lock has shared holders (readers), with the same expiry
-- as their slots, and deletes it when the last one leaves: a distlock of protocol 1 (0.1.x)
-- then refuses the lock (it would read the readers as a semaphore of limit 0), and meets no
-- marker on any other lock, so that releasing a lock it holds (a mutex or a semaphore slot,
-- which never coexist with readers) never fails. A client of a newer protocol N > 2 keeps the
-- decimal string N there for as long as any key of such a lock exists. Meeting any other value
-- than '1' or '2', every script refuses with the error reply
--   DISTLOCK-PROTOCOL <found> 2
-- so that this distlock never misreads a lock written in another layout, and never overwrites or
-- deletes it. The key is found by its name (the lock's key + ':protocol'), whatever its place
-- among the declared KEYS (the client also declares it, for Redis Cluster).
local protocol = redis.call('GET', string.match(KEYS[1], '^(.*})') .. ':protocol')
if protocol and protocol ~= '1' and protocol ~= '2' then
  return redis.error_reply(
    'DISTLOCK-PROTOCOL ' .. string.gsub(string.sub(protocol, 1, 20), '[^%w%.%-]', '?') .. ' 2')
end
