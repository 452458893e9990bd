-- distlock release: delete the lock KEYS[1] and its metadata KEYS[2], only if the lock holds
-- the token ARGV[1], and tell the waiters on channel ARGV[2].
-- Returns {1} when released, {0} when the lock did not hold that token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('PUBLISH', ARGV[2], 'released')
  return {1}
end
return {0}
