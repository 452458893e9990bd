-- distlock holds (after common.lua; changes nothing): whether token ARGV[1] still holds the
-- mutex or a live semaphore slot. Returns {1, fence} or {0}.
if redis.call('GET', LOCK) == ARGV[1] then
  return {1, tonumber(redis.call('HGET', OWNER, 'fence') or '0')}
end
local slot = redis.call('ZSCORE', SLOTS, ARGV[1])
if slot and tonumber(slot) > NOW then
  local ok, held = pcall(cjson.decode, redis.call('HGET', HOLDERS, ARGV[1]) or '{}')
  return {1, tonumber(ok and type(held) == 'table' and held.fence or '0') or 0}
end
return {0}
