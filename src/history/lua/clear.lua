-- distlock history: clear (a script of its own). KEYS: P{K}:history, P{K}:history:held.
-- Deletes the lock's history: from now on nothing records into it until a distlock with
-- --history takes the lock again. Returns how many keys were deleted.
return {redis.call('DEL', KEYS[1]) + redis.call('DEL', KEYS[2])}
