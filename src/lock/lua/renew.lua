-- distlock renew: extend the lock KEYS[1] to ARGV[2] ms, only if it still holds our token ARGV[1].
-- Never re-creates an expired key. Returns {1} when extended, {0} when the lock is not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
return {0}
