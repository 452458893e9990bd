-- distlock history: lost (after history.lua). A holder whose lock was lost reports it, if the
-- lock has a history (it never creates one). KEYS: P{K}:history, P{K}:history:held.
-- ARGV: 1 the holder's token, 2 why (words), 3 how long it held the lock by its own count (ms,
-- used when the history no longer knows the hold: the next taker recorded it as expired), then
-- field/value pairs of the holder's metadata.
-- Returns 1 when recorded, 0 when the lock has no history.
H_DECLARED = true
if not h_on() then
  return {0}
end
local token = ARGV[1]
local held = h_decode(redis.call('HGET', HELD, token))
local extra = {why = ARGV[2]}
if held then
  redis.call('HDEL', HELD, token)
  extra.fence = held.fence
  extra.slot = held.slot
  extra.held_ms = h_int(h_now() - (tonumber(held.acquired_at or '') or h_now()))
else
  held = {}
  for i = 4, #ARGV - 1, 2 do
    held[ARGV[i]] = ARGV[i + 1]
  end
  extra.held_ms = ARGV[3]
  extra.expired = '1'
end
h_record('lost', token, held, extra)
return {1}
