-- distlock release (after common.lua): token ARGV[1] is done. Its place in line goes (a waiter
-- that gives up), and the mutex or semaphore slot it holds (a holder that is done, a lost reply
-- that landed, a lock handed to it meanwhile) is released and handed directly to the first
-- waiters in line (waking only them); when nobody waits, a release that leaves the lock free
-- publishes on P{K}:released.
-- ARGV[2] = '1': the work done under the lock succeeded, so a mutex taken with an interval
-- (min_interval_ms, cooldown_ms in its metadata) stays taken until the interval has passed
-- (see cool_down in common.lua); otherwise, and for a break, it is free at once.
-- Returns {1} when it released something (or began its cool-down), {0} otherwise.
-- ARGV[3..]: field/value pairs for the history (see history.lua): history_ms, outcome (of the
-- work: 'exit N', 'signal N', ...), and for a break, break = '1' and the breaker's by_host,
-- by_pid, by_user, by_command.
local h = {}
for i = 3, #ARGV - 1, 2 do
  h[ARGV[i]] = ARGV[i + 1]
end
H_ARG_MS = tonumber(h.history_ms or '')
H_OUTCOME = h.outcome
if h['break'] == '1' then
  H_BREAKER = {host = h.by_host, pid = h.by_pid, user = h.by_user, command = h.by_command}
end
h_sweep()
if redis.call('ZSCORE', QUEUE, ARGV[1]) then
  h_left('gave-up', ARGV[1], redis.call('HGET', WAITERS, ARGV[1]))
end
leave_queue(ARGV[1])
redis.call('HDEL', SUPERSEDED, ARGV[1])
-- (Its doorbell too, if it waited on one: same slot, see 'Declared keys' in common.lua.)
redis.call('DEL', LOCK .. ':wake:' .. ARGV[1])
purge_waiters()
local released = release(ARGV[1], ARGV[2] == '1')
if released == 0 then
  -- It may have been first in line for a free lock: the next one is now.
  purge_slots()
  if not writer_holds() and redis.call('ZCARD', QUEUE) > 0 then
    hand_off()
  end
  expire_with(ALIVE, {QUEUE, WAITERS, ALIVE})
end
return {released}
