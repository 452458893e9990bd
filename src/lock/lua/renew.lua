-- distlock renew: extend the lock KEYS[1] and its metadata KEYS[2] to ARGV[2] ms, only if the
-- lock still holds our token ARGV[1]. Never re-creates an expired key. ARGV[2] = "0" means the
-- TTL the lock was acquired with (the metadata's ttl_ms; 30s if unknown).
-- Returns {1} when extended, {0} when the lock is not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local ttl = ARGV[2]
  if ttl == '0' then
    ttl = redis.call('HGET', KEYS[2], 'ttl_ms') or '30000'
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {1}
end
return {0}
