-- distlock renew (after common.lua): extend our mutex or semaphore slot to ARGV[2] ms, only if
-- it still holds our token ARGV[1]. Never re-creates an expired lock. ARGV[2] = "0" means the
-- TTL it was acquired with (its metadata's ttl_ms; 30s if unknown).
-- ARGV[3], when given, is a fence floor: the fence counter is raised to at least it (a Redlock
-- makes every node's counter reach the fence it granted, so that a later majority, which
-- shares a node with this one, hands out a larger fence).
-- KEYS: what the renewal touches, so that it goes through a Cluster slot migration (see
-- common.lua): P{K} and P{K}:owner to renew a mutex, P{K}:slots and P{K}:holders to renew a
-- semaphore slot (a shared lock's reader: P{K}:slots, P{K}:holders, P{K} and P{K}:protocol,
-- whose marks follow its slot, see mark_shared in common.lua), each followed by P{K}:fence
-- when ARGV[3] is given; or all the keys of the
-- lock, for a caller that does not know which it holds (the mutex is tried, then the slot).
-- Returns {1, ttl_ms} (the expiry applied) when extended, and {1, ttl_ms, replacer} when a
-- newer run asked the mutex holder to stop (--replace; replacer: its JSON metadata); {0} when
-- the lock is not ours.
local token, ttl = ARGV[1], ARGV[2]
local all = #KEYS >= 9
local function raise_fence()
  if ARGV[3] and tonumber(redis.call('GET', FENCE) or '0') < tonumber(ARGV[3]) then
    redis.call('SET', FENCE, ARGV[3])
  end
end
-- (The readers' mark in the mutex key is nobody's token.)
if token == SHARED then
  return {0}
end
local declared = {}
for _, key in ipairs(KEYS) do
  declared[key] = true
end
if KEYS[1] == LOCK then
  if redis.call('GET', LOCK) == token then
    if ttl == '0' then
      ttl = redis.call('HGET', OWNER, 'ttl_ms') or '30000'
    end
    redis.call('PEXPIRE', LOCK, ttl)
    redis.call('PEXPIRE', OWNER, ttl)
    raise_fence()
    local replacer = redis.call('HGET', OWNER, 'replaced_by')
    if replacer then
      return {1, tonumber(ttl), replacer}
    end
    return {1, tonumber(ttl)}
  end
  if not all then
    return {0}
  end
end
local slot = redis.call('ZSCORE', SLOTS, token)
if slot and tonumber(slot) > NOW then
  if ttl == '0' then
    local ok, held = pcall(cjson.decode, redis.call('HGET', HOLDERS, token) or '{}')
    ttl = ok and type(held) == 'table' and held.ttl_ms or '30000'
  end
  redis.call('ZADD', SLOTS, int(NOW + tonumber(ttl)), token)
  expire_with(SLOTS, {SLOTS, HOLDERS})
  if declared[LOCK] and declared[PROTOCOL] then
    mark_shared()
  end
  raise_fence()
  return {1, tonumber(ttl)}
end
return {0}
