-- distlock acquire (after common.lua): one attempt to take the lock, and the waiter's place in
-- line. ARGV: 1 token, 2 claim in ms (the expiry an attempt sets; the holder then extends it to
-- its TTL), 3 limit (1: a mutex, or a shared lock's writer; N: a semaphore of N; 0: a shared lock's
-- reader, with mode = 'shared' in the metadata), 4 mode ('try': no place in line; 'join':
-- join the line or keep our place; 'supersede': the same, and cancel every older waiter;
-- 'replace': as 'supersede', and ask the mutex holder to stop, see below; 'refresh': a
-- waiter's later attempts: keep our place and take up our turn, never more: no new place, no
-- grant without one, see below),
-- 5 place in ms (how long our place lasts without another attempt), 6 take-up window in ms (how
-- long a lock handed to us waits for us), 7.. metadata field/value pairs (host, pid, user,
-- command, kind, version, ci_url, note, ttl_ms, polls = '1' for a waiter that polls, wake =
-- 'list' for a waiter that waits on its doorbell (see wake in common.lua), and
-- fence_floor, the least fence a Redlock wants, and history_ms, how long to keep the lock's
-- history (--history, see history.lua), neither of which is stored).
-- Replies:
--   {1, fence[, slot]}                                  granted (slot: a semaphore's index;
--                                                       none for a mutex or a reader)
--   {0, pttl, now_ms, holder, holders, limit, waiting}  busy (try)
--   {2, pttl, now_ms, holder, holders, limit, waiting, position}   in line (1 = first)
--   {3, superseder}                                     cancelled by a newer waiter
--   {4, use, limit, holders, holder}                    the key is used otherwise: 'mutex',
--                                                       'semaphore', 'shared' (readers), or
--                                                       'queue' (its waiters)
--   {5}                                                 no place (refresh: none to keep)
-- where holder is a flat field/value array (the mutex holder's, or the soonest-expiring
-- semaphore holder's, or the latest-expiring reader's), pttl its remaining ms (-1: no
-- expiry, -2: free). A reader and a writer of one key are one family: each waits for the
-- other (limit 0 and 1 below), in one line.
local token, claim, limit, mode = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local place, takeup = tonumber(ARGV[5]), tonumber(ARGV[6])
local info = {}
for i = 7, #ARGV, 2 do
  info[ARGV[i]] = ARGV[i + 1]
end
-- A Redlock proposes a fence floor (not metadata): every node whose counter and clock are below
-- it grants exactly it, so that the nodes agree and no second round is needed to align them.
FLOOR = tonumber(info.fence_floor or '0') or 0
info.fence_floor = nil
-- --history (ms), not metadata either (see history.lua).
H_ARG_MS = tonumber(info.history_ms or '')
info.history_ms = nil
-- A reader sends limit 0 and mode = 'shared' (kept in its metadata); nothing else is one.
local shared = limit == 0 and info.mode == 'shared'
if limit == 0 and not shared then
  limit = 1
end

purge_waiters()
purge_slots()
h_sweep()

-- Ours already: the lock was handed to us, or an earlier attempt whose reply was lost landed.
-- A hand-off is taken up: the expiry becomes our claim (the take-up window may be longer than
-- our TTL). Otherwise the expiry is raised to the claim, never lowered (a delayed duplicate
-- may come after renewals).
if redis.call('GET', LOCK) == token then
  if redis.call('HGET', OWNER, 'handed') then
    redis.call('HDEL', OWNER, 'handed')
    redis.call('DEL', LOCK .. ':wake:' .. token)
    h_taken_up(token)
    redis.call('PEXPIRE', LOCK, claim)
    redis.call('PEXPIRE', OWNER, claim)
  else
    raise_expiry(LOCK, claim)
    raise_expiry(OWNER, claim)
  end
  leave_queue(token)
  return {1, tonumber(redis.call('HGET', OWNER, 'fence') or '0')}
end
local slot = redis.call('ZSCORE', SLOTS, token)
if slot then
  local ok, held = pcall(cjson.decode, redis.call('HGET', HOLDERS, token) or '{}')
  if not ok or type(held) ~= 'table' then
    held = {}
  end
  if held.handed then
    held.handed = nil
    redis.call('DEL', LOCK .. ':wake:' .. token)
    h_taken_up(token)
    redis.call('HSET', HOLDERS, token, cjson.encode(held))
    redis.call('ZADD', SLOTS, int(NOW + claim), token)
    expire_with(SLOTS, {SLOTS, HOLDERS})
  elseif tonumber(slot) < NOW + claim then
    redis.call('ZADD', SLOTS, int(NOW + claim), token)
    expire_with(SLOTS, {SLOTS, HOLDERS})
  end
  mark_shared()
  leave_queue(token)
  if not held.slot then
    return {1, tonumber(held.fence or '0') or 0}
  end
  return {1, tonumber(held.fence or '0') or 0, tonumber(held.slot) or 0}
end

-- Cancelled by a newer waiter (--supersede).
local by = redis.call('HGET', SUPERSEDED, token)
if by then
  return {3, flat(by)}
end

-- A waiter's later attempt keeps a place, never makes one: an attempt that runs after its
-- waiter gave up (sent behind a blocking wait on its doorbell, on a connection since dropped)
-- finds none, and neither joins nor takes a free lock.
-- (A lock found free with others in line is handed on all the same, as by any script.)
if mode == 'refresh' and not redis.call('ZSCORE', QUEUE, token) then
  if not writer_holds() and redis.call('ZCARD', QUEUE) > 0 then
    hand_off()
  end
  return {5}
end

-- One key, one use: a mutex (or a shared lock: readers and writers), or a semaphore of one
-- limit, with waiters of the same.
local function family(l)
  if l <= 1 then
    return 1
  end
  return l
end
local use
local stored = tonumber(redis.call('HGET', HOLDERS, 'limit') or '')
if limit <= 1 then
  if redis.call('ZCARD', SLOTS) > 0 and stored ~= 0 then
    use = 'semaphore'
  end
elseif writer_holds() then
  use = 'mutex'
elseif stored == 0 and redis.call('ZCARD', SLOTS) > 0 then
  use = 'shared'
elseif stored and stored ~= limit then
  use = 'semaphore'
end
if use then
  local view = holders_view()
  return {4, use, view[4], view[3], view[2]}
end
local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
if head then
  local theirs = tonumber(waiter_info(head).limit or '1') or limit
  if family(theirs) ~= family(limit) then
    return {4, 'queue', theirs, redis.call('ZCARD', QUEUE), flat(redis.call('HGET', WAITERS, head))}
  end
end

-- Take it if it is free and nobody waits before us (see ahead_of for waiters that poll, and
-- ahead_for_reader for readers).
local position = redis.call('ZRANK', QUEUE, token)
local waiting = redis.call('ZCARD', QUEUE)
local polls = info.polls == '1'
if shared then
  -- A reader: no writer holds it, and no writer waits before us (readers before us are
  -- admitted with us, by the hand-off).
  if not writer_holds() then
    if ahead_for_reader(position, waiting) == 0 then
      local fence = grant_slot(token, claim, 0, info)
      hand_off()
      return {1, fence}
    end
    hand_off()
  end
elseif limit == 1 then
  if not writer_holds() then
    if redis.call('ZCARD', SLOTS) > 0 then
      -- Readers hold it: the last to leave hands it on.
    elseif ahead_of(position, waiting, polls) == 0 then
      return {1, grant_mutex(token, claim, info)}
    end
    -- Free, with others first in line (a holder or a handed-to waiter vanished), or held by
    -- readers with readers first in line: hand it on.
    hand_off()
  end
else
  local free = limit - redis.call('ZCARD', SLOTS)
  if free > 0 then
    if ahead_of(position, waiting, polls) < free then
      local fence, slot = grant_slot(token, claim, limit, info)
      return {1, fence, slot}
    end
    hand_off()
  end
end

local view = holders_view()
if mode == 'try' then
  return {0, view[1], NOW, view[2], view[3], view[4], redis.call('ZCARD', QUEUE)}
end

-- Join the line, or keep our place in it.
local ticket = redis.call('ZSCORE', QUEUE, token)
if ticket then
  ticket = tonumber(ticket)
  -- A waiter that could not subscribe polls from now on, one whose doorbell was refused
  -- subscribes: say so.
  local w = waiter_info(token)
  if (w.polls or '0') ~= (info.polls or '0') or w.wake ~= info.wake then
    w.polls = info.polls
    w.wake = info.wake
    redis.call('HSET', WAITERS, token, cjson.encode(w))
  end
else
  ticket = next_number()
  redis.call('ZADD', QUEUE, int(ticket), token)
  local w = {}
  for k, v in pairs(info) do
    w[k] = v
  end
  w.since = int(NOW)
  w.limit = tostring(limit)
  w.takeup_ms = tostring(takeup)
  w.place = tostring(redis.call('ZCARD', QUEUE))
  local entry = cjson.encode(w)
  redis.call('HSET', WAITERS, token, entry)
  h_waiting(token, entry)
end
redis.call('ZADD', ALIVE, int(NOW + place), token)
-- Newest replaces the running one (--replace): the mutex holder is asked to stop its command
-- (replaced_by in its owner hash, which its renewals report, and a message on its own wake
-- channel); it releases once its command is dead, and the lock is handed to the first in line.
-- A lock cooling down after a run (ended_at) has no command left to stop.
if mode == 'replace' then
  local holder = redis.call('GET', LOCK)
  if holder and holder ~= token and holder ~= SHARED
    and not redis.call('HGET', OWNER, 'ended_at') then
    redis.call('HSET', OWNER, 'replaced_by', redis.call('HGET', WAITERS, token))
    wake(holder, 'replaced')
  end
end
if mode == 'supersede' or mode == 'replace' then
  local older = redis.call('ZRANGEBYSCORE', QUEUE, '-inf', '(' .. int(ticket))
  if #older > 0 then
    local me = redis.call('HGET', WAITERS, token)
    for _, t in ipairs(older) do
      local theirs = waiter_info(t)
      h_left('superseded', t, redis.call('HGET', WAITERS, t), info, token)
      leave_queue(t)
      redis.call('HSET', SUPERSEDED, t, me)
      wake(t, 'superseded', theirs)
    end
    redis.call('PEXPIRE', SUPERSEDED, place)
  end
end
expire_with(ALIVE, {QUEUE, WAITERS, ALIVE})
return {
  2, view[1], NOW, view[2], view[3], view[4], redis.call('ZCARD', QUEUE),
  redis.call('ZRANK', QUEUE, token) + 1,
}
