-- distlock inspect (after common.lua; changes nothing): everything about the lock.
-- Returns {now_ms, mutex, slots, limit, waiters, last_number} where
--   mutex   = {token, pttl, metadata} or {} when no mutex is held,
--   slots   = {token, remaining_ms, metadata, ...} for live semaphore holders (soonest first),
--   limit   = the semaphore's limit (0 when none, and for a shared lock's readers, whose
--             metadata says mode = 'shared'),
--   waiters = {token, ticket, metadata, ...} for waiters whose place is alive, first in line first,
--   last_number = the last fence or ticket handed out (0 when none),
-- metadata being flat field/value arrays.
local mutex = {}
local holder = redis.call('GET', LOCK)
if holder and holder ~= SHARED then
  mutex = {holder, redis.call('PTTL', LOCK), redis.call('HGETALL', OWNER)}
end
local slots = {}
local live = redis.call('ZRANGEBYSCORE', SLOTS, '(' .. int(NOW), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  slots[#slots + 1] = live[i]
  slots[#slots + 1] = tonumber(live[i + 1]) - NOW
  slots[#slots + 1] = flat(redis.call('HGET', HOLDERS, live[i]))
end
local waiters = {}
local line = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
for i = 1, #line, 2 do
  local alive = redis.call('ZSCORE', ALIVE, line[i])
  if alive and tonumber(alive) >= NOW then
    waiters[#waiters + 1] = line[i]
    waiters[#waiters + 1] = line[i + 1]
    waiters[#waiters + 1] = flat(redis.call('HGET', WAITERS, line[i]))
  end
end
local limit = 0
if #slots > 0 then
  limit = tonumber(redis.call('HGET', HOLDERS, 'limit') or '0')
end
return {NOW, mutex, slots, limit, waiters, tonumber(redis.call('GET', FENCE) or '0')}
