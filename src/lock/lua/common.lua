-- distlock: what every script shares (each script is this file followed by its own body).
--
-- The keys of one lock, all under its hash tag P{K} (so one Cluster slot holds them all):
--   P{K}             the mutex: a string holding the holder's token, PX expiry; while a shared
--                    lock has readers, the string SHARED (below, never a token) instead, so
--                    that other clients' locks on the key (redis-py, node-redlock) and
--                    readers exclude each other
--   P{K}:owner       hash: the mutex holder's metadata, same expiry (fields below)
--   P{K}:fence       string: the last number handed out (fences and queue tickets); no expiry
--   P{K}:queue       zset: waiter token -> ticket (the order of the line)
--   P{K}:waiters     hash: waiter token -> JSON metadata (host, pid, ..., since, limit)
--   P{K}:alive       zset: waiter token -> deadline of its place (server ms)
--   P{K}:slots       zset: semaphore holder (or reader) token -> expiry (server ms)
--   P{K}:holders     hash: 'limit' -> N (0: a shared lock's readers), holder token -> JSON
--   P{K}:superseded  hash: token of a waiter cancelled by --supersede -> JSON of who did it
--   P{K}:protocol    string: the key layout's version: '2' while a shared lock has readers
--                    (so that a distlock of protocol 1 refuses it), absent otherwise (see
--                    protocol.lua)
--   P{K}:history     stream: the lock's events, only once a history was asked for
--   P{K}:history:held  hash: the current holds the history knows (see history.lua)
--   P{K}:wake:TOKEN  list: that waiter's doorbell, for a waiter that waits on it (wake = 'list'
--                    in its metadata): 'granted' or 'superseded', pushed when its turn came or
--                    it was cancelled; expires with the waiter's take-up window. Not declared:
--                    same slot as the lock (see 'Declared keys' below).
-- Channels: P{K}:released (a release that left the lock free), P{K}:wake:TOKEN (the same
-- news for a waiter that subscribes, an older distlock's or one whose doorbell is refused, and
-- 'replaced' for a holder asked to stop by --replace).
--
-- Declared keys. A script declares the keys it may touch, and the names of all of them follow
-- from its first key (P{K} is everything up to the last '}': keys contain no braces). Most
-- scripts declare all twelve, in the order above. A renewal declares only what it touches (see
-- renew.lua), because of Cluster slot migration: while a slot moves, Redis refuses with
-- TRYAGAIN a script whose declared keys are partly on each node (or partly missing), and a
-- script running on the source node fails when it touches a key that is not there. A mutex has
-- no line and no slots, so a script declaring all ten is refused for the whole migration,
-- while its holder's renewal, declaring the mutex and its owner hash (which move together or a
-- batch apart), goes through on one node or the other.
--
-- What makes this safe: a script runs on the source of a migration only if every key it
-- declares is there, and it touches only keys it declares. A script declaring all ten never
-- runs there (a lock is a mutex or a semaphore, never both: some of its keys never exist),
-- and a renewal only extends keys that are there. An ASK reply means that none of the declared
-- keys is on the source, so the target holds every one that exists: the request is sent there
-- with ASKING declaring only its first key (the target would refuse the others with TRYAGAIN
-- for not existing anywhere), and every command touches one key (the target checks each).

local LOCK = string.match(KEYS[1], '^(.*})')
local OWNER, FENCE, QUEUE, WAITERS, ALIVE, SLOTS, HOLDERS, SUPERSEDED =
  LOCK .. ':owner', LOCK .. ':fence', LOCK .. ':queue', LOCK .. ':waiters', LOCK .. ':alive',
  LOCK .. ':slots', LOCK .. ':holders', LOCK .. ':superseded'
local PROTOCOL = LOCK .. ':protocol'

-- Shared (reader/writer) locks. A reader (metadata mode = 'shared', limit 0) holds a slot of
-- limit 0 (no index); a writer holds the mutex. Readers hold a key together, a writer alone;
-- the line is FIFO across modes (see ahead_for_reader and hand_off). While readers exist the
-- mutex key holds SHARED, expiring a second after the latest reader's slot, and P{K}:protocol
-- holds '2' with the same expiry (see mark_shared).
local SHARED = 'distlock:shared'

-- Whether the mutex is held: by a writer, or by another client's lock on the key (not the
-- readers' SHARED).
local function writer_holds()
  local v = redis.call('GET', LOCK)
  return v ~= false and v ~= SHARED
end

-- Time is the server's (TIME), never a client's: waiter places and semaphore slots expire by
-- it. Lua numbers are doubles: integers stay exact up to 2^53 (the clock in microseconds is
-- about 2^51), and are formatted with %.0f (tostring would write 1.7e+15).

local function int(n)
  return string.format('%.0f', n)
end

local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end
local NOW, NOW_US = clock()

-- A floor for the next number, which a script may set from its arguments (a Redlock proposes
-- the same one to every node, so that nodes in step hand out the same fence: see acquire.lua).
local FLOOR = 0

-- The next number for KEY: strictly greater than every earlier one, and than the server's clock
-- in microseconds, so that it never goes backwards even if the counter is lost (evicted, or a
-- restart without persistence), as long as the server's clock does not.
local function next_number()
  local last = tonumber(redis.call('GET', FENCE) or '0')
  local n = math.max(last + 1, NOW_US, FLOOR)
  redis.call('SET', FENCE, int(n))
  return n
end

-- Tell TOKEN its news: on its doorbell if it waits on one (INFO, its waiter metadata, says
-- wake = 'list'): the push is data, so it waits there for the waiter's blocking pop however
-- late that comes, and expires with the take-up window; otherwise (a subscriber, a holder, a
-- push refused by an ACL without +lpush) on the channel of the same name.
local function wake(token, message, info)
  local bell = LOCK .. ':wake:' .. token
  if info and info.wake == 'list' then
    local pushed = redis.pcall('LPUSH', bell, message)
    if type(pushed) == 'number' then
      redis.call('PEXPIRE', bell, tonumber(info.takeup_ms or '3000') or 3000)
      return
    end
  end
  redis.call('PUBLISH', bell, message)
end

-- Raise KEY's expiry to MS from now if it is shorter; never lower it.
local function raise_expiry(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- A zset's, or a set of keys', expiry follows its latest member deadline.
local function expire_with(zset, keys)
  local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')[2]
  for _, key in ipairs(keys) do
    if last then
      redis.call('PEXPIREAT', key, int(tonumber(last) + 1000))
    else
      redis.call('DEL', key)
    end
  end
end

local function leave_queue(token)
  redis.call('ZREM', QUEUE, token)
  redis.call('ZREM', ALIVE, token)
  redis.call('HDEL', WAITERS, token)
  h_left_line(token)
end

-- Forget waiters whose place was not kept alive (their process is gone), and say so in the
-- lock's history (if it has one and this script records: see history.lua).
local function purge_waiters()
  local lapsed = redis.call('ZRANGEBYSCORE', ALIVE, '-inf', '(' .. int(NOW), 'WITHSCORES')
  for i = 1, #lapsed, 2 do
    local token = lapsed[i]
    h_lapsed(token, redis.call('HGET', WAITERS, token), tonumber(lapsed[i + 1]))
    leave_queue(token)
  end
end

-- While a shared lock has readers, the mutex key holds SHARED and P{K}:protocol '2', both
-- expiring a second after the latest reader's slot (never overwriting another client's lock);
-- without readers, neither. Called after every change to the readers' slots.
local function mark_shared()
  local last = redis.call('ZRANGE', SLOTS, -1, -1, 'WITHSCORES')[2]
  if last and redis.call('HGET', HOLDERS, 'limit') == '0' then
    local at = int(tonumber(last) + 1000)
    local v = redis.call('GET', LOCK)
    if v == false or v == SHARED then
      redis.call('SET', LOCK, SHARED)
      redis.call('PEXPIREAT', LOCK, at)
    end
    redis.call('SET', PROTOCOL, '2')
    redis.call('PEXPIREAT', PROTOCOL, at)
  else
    if redis.call('GET', LOCK) == SHARED then
      redis.call('DEL', LOCK)
    end
    if redis.call('GET', PROTOCOL) == '2' then
      redis.call('DEL', PROTOCOL)
    end
  end
end

-- Forget semaphore holders (and readers) whose slot expired; a semaphore without holders
-- forgets its limit, a shared lock without readers its marks.
local function purge_slots()
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', SLOTS, '-inf', int(NOW))) do
    redis.call('ZREM', SLOTS, token)
    redis.call('HDEL', HOLDERS, token)
  end
  if redis.call('ZCARD', SLOTS) == 0 then
    redis.call('DEL', HOLDERS)
    mark_shared()
  end
end

-- A JSON object's fields as a flat field/value array (what clients decode for the mutex too).
local function flat(json)
  local out = {}
  if not json then
    return out
  end
  local ok, t = pcall(cjson.decode, json)
  if not ok or type(t) ~= 'table' then
    return out
  end
  for k, v in pairs(t) do
    if type(v) == 'number' then
      v = int(v)
    end
    if type(v) == 'string' then
      out[#out + 1] = k
      out[#out + 1] = v
    end
  end
  return out
end

-- Grant the mutex to TOKEN for MS with metadata INFO (a table of strings), return its fence.
-- HANDED: the lock is handed to a waiter for its take-up window (field 'handed' = '1' until
-- the waiter's attempt takes it up and sets its own expiry).
local function grant_mutex(token, ms, info, handed)
  local fence = next_number()
  redis.call('SET', LOCK, token, 'PX', ms)
  redis.call('DEL', OWNER)
  local fields = {'acquired_at', int(NOW), 'fence', int(fence)}
  for k, v in pairs(info) do
    if k ~= 'since' and k ~= 'limit' and k ~= 'takeup_ms' and k ~= 'polls' and k ~= 'place'
      and k ~= 'wake' and type(v) == 'string' then
      fields[#fields + 1] = k
      fields[#fields + 1] = v
    end
  end
  if handed then
    fields[#fields + 1] = 'handed'
    fields[#fields + 1] = '1'
  end
  redis.call('HSET', OWNER, unpack(fields))
  redis.call('PEXPIRE', OWNER, ms)
  h_acquired(token, fence, nil, info, redis.call('HGET', WAITERS, token), handed)
  leave_queue(token)
  return fence
end

-- The lowest slot index (0 to LIMIT-1) that no live holder of the semaphore has (expired
-- holders must have been purged first). Holders of an older distlock have no index.
local function free_slot(limit)
  local used = {}
  local all = redis.call('HGETALL', HOLDERS)
  for i = 1, #all, 2 do
    if all[i] ~= 'limit' then
      local ok, held = pcall(cjson.decode, all[i + 1])
      if ok and type(held) == 'table' and held.slot then
        used[tonumber(held.slot) or -1] = true
      end
    end
  end
  for n = 0, limit - 1 do
    if not used[n] then
      return n
    end
  end
  return 0
end

-- Grant a semaphore slot of LIMIT to TOKEN for MS with metadata INFO, return its fence and its
-- slot index, the lowest free one, or nil for a reader (LIMIT 0) (HANDED: as for the mutex, a
-- field of the holder's JSON).
local function grant_slot(token, ms, limit, info, handed)
  local fence = next_number()
  local held = {}
  for k, v in pairs(info) do
    if k ~= 'since' and k ~= 'takeup_ms' and k ~= 'polls' and k ~= 'place' and k ~= 'wake' then
      held[k] = v
    end
  end
  -- (A reader, of limit 0, has no index.)
  local slot
  if limit > 0 then
    slot = free_slot(limit)
  end
  held.acquired_at = int(NOW)
  held.fence = int(fence)
  held.slot = slot and tostring(slot)
  held.limit = nil
  if handed then
    held.handed = '1'
  end
  redis.call('ZADD', SLOTS, int(NOW + ms), token)
  redis.call('HSET', HOLDERS, 'limit', tostring(limit), token, cjson.encode(held))
  expire_with(SLOTS, {SLOTS, HOLDERS})
  if limit == 0 then
    mark_shared()
  end
  h_acquired(token, fence, slot, info, redis.call('HGET', WAITERS, token), handed)
  leave_queue(token)
  return fence, slot
end

-- A waiter's metadata (a table; empty when unreadable).
local function waiter_info(token)
  local ok, info = pcall(cjson.decode, redis.call('HGET', WAITERS, token) or '{}')
  if not ok or type(info) ~= 'table' then
    return {}
  end
  return info
end

-- How many waiters TOKEN must let go first: every waiter before it in line (all of them if it
-- has no place yet); for a waiter that polls (spin mode, which nobody can wake), only the
-- waiters before it that are woken by hand-off: waiters that poll take a free lock in whatever
-- order they find it (as polling does), but never before a waiter that joined the line before
-- them and is waiting to be handed the lock. Past 64 waiters, all are counted.
local function ahead_of(position, waiting, polls)
  local before = position or waiting
  if not polls or before == 0 then
    return before
  end
  if before > 64 then
    return before
  end
  local count = 0
  for _, t in ipairs(redis.call('ZRANGE', QUEUE, 0, before - 1)) do
    if waiter_info(t).polls ~= '1' then
      count = count + 1
    end
  end
  return count
end

-- How many waiters a reader (of a shared lock) must let go first: the writers before it in line,
-- whatever their wait mode (a reader never passes a writer that joined before it); readers
-- before it do not count (they are admitted with it: see hand_off). Past 64 waiters before
-- it, all are counted (hand_off then admits it, with the readers before it).
local function ahead_for_reader(position, waiting)
  local before = position or waiting
  if before == 0 or before > 64 then
    return before
  end
  local count = 0
  for _, t in ipairs(redis.call('ZRANGE', QUEUE, 0, before - 1)) do
    if waiter_info(t).limit ~= '0' then
      count = count + 1
    end
  end
  return count
end

-- The lock is (partly) free: hand it to the waiters first in line, directly, and wake only
-- them. A waiter that does not take it up (an attempt of its own, which sets the expiry to its
-- claim) within its takeup_ms loses it when that expires. A waiter that polls is not handed
-- anything (it could not be woken): at the head of the line, it leaves the lock free for the
-- waiters that poll, and the others behind it wait.
local function hand_off()
  purge_waiters()
  purge_slots()
  local skipped = 0
  for _ = 1, 1000 do
    local head = redis.call('ZRANGE', QUEUE, skipped, skipped)[1]
    if not head then
      break
    end
    local info = waiter_info(head)
    local limit = tonumber(info.limit or '1') or 1
    local takeup = tonumber(info.takeup_ms or '5000') or 5000
    local grant = true
    if limit == 0 then
      -- A reader: admitted unless a writer holds, with every reader after it up to the next
      -- writer in line (a batch). A reader that polls is skipped (it takes its slot at its
      -- next poll), not waited for: readers do not exclude each other.
      if writer_holds() or (redis.call('HGET', HOLDERS, 'limit') or '0') ~= '0' then
        break
      end
      if info.polls == '1' then
        skipped = skipped + 1
        grant = false
      else
        grant_slot(head, takeup, 0, info, true)
      end
    else
      -- A writer or a semaphore waiter: never past a reader before it that polls.
      if info.polls == '1' or skipped > 0 then
        break
      end
      local blocked
      if limit == 1 then
        blocked = writer_holds() or redis.call('ZCARD', SLOTS) > 0
      else
        local stored = tonumber(redis.call('HGET', HOLDERS, 'limit') or tostring(limit))
        blocked = writer_holds() or stored ~= limit or redis.call('ZCARD', SLOTS) >= limit
      end
      if blocked then
        break
      elseif limit == 1 then
        grant_mutex(head, takeup, info, true)
      else
        grant_slot(head, takeup, limit, info, true)
      end
    end
    if grant then
      wake(head, 'granted', info)
    end
  end
  expire_with(ALIVE, {QUEUE, WAITERS, ALIVE})
  if not writer_holds() and redis.call('ZCARD', SLOTS) == 0 then
    redis.call('PUBLISH', LOCK .. ':released', 'released')
  end
end

-- After a run that succeeded, a mutex taken with min_interval_ms or cooldown_ms in its
-- metadata stays taken by the same token (nobody can take it, and status shows it) until the
-- later of acquired_at + min_interval_ms and now + cooldown_ms; then it expires like any lock,
-- and the next attempt (a waiter's, at the latest at its refresh) finds it free and hands it on.
-- Returns whether it stays.
local function cool_down()
  local function field(name)
    return tonumber(redis.call('HGET', OWNER, name) or '')
  end
  local from_start = (field('acquired_at') or NOW) + (field('min_interval_ms') or 0)
  local from_end = NOW + (field('cooldown_ms') or 0)
  local until_ms = math.max(from_start, from_end)
  if until_ms <= NOW then
    return false
  end
  redis.call('PEXPIRE', LOCK, int(until_ms - NOW))
  redis.call('HSET', OWNER, 'ended_at', int(NOW), 'cooldown_until', int(until_ms))
  redis.call('HDEL', OWNER, 'handed')
  redis.call('PEXPIRE', OWNER, int(until_ms - NOW))
  return true
end

-- Release TOKEN's mutex or slot, and hand the lock on. Returns 1 if it held one, else 0.
-- SUCCEEDED: the work done under the lock succeeded, so a mutex cools down (see cool_down).
local function release(token, succeeded)
  if token == SHARED then
    return 0
  end
  if redis.call('GET', LOCK) == token then
    h_released(token)
    if succeeded and cool_down() then
      return 1
    end
    -- (One key per command: see 'Declared keys' above.)
    redis.call('DEL', LOCK)
    redis.call('DEL', OWNER)
  elseif redis.call('ZSCORE', SLOTS, token) then
    h_released(token)
    redis.call('ZREM', SLOTS, token)
    redis.call('HDEL', HOLDERS, token)
    purge_slots()
    expire_with(SLOTS, {SLOTS, HOLDERS})
    mark_shared()
  else
    return 0
  end
  hand_off()
  return 1
end

-- What a waiter learns about the holders: {pttl, holder metadata (flat), holders, limit}, where
-- pttl is the mutex holder's remaining time (-1: no expiry) or the soonest slot expiry; for a
-- shared lock's readers (limit 0), the latest (when the last reader's lease ends unless
-- renewed), with that reader's metadata.
local function holders_view()
  if writer_holds() then
    return {redis.call('PTTL', LOCK), redis.call('HGETALL', OWNER), 1, 1}
  end
  purge_slots()
  local limit = tonumber(redis.call('HGET', HOLDERS, 'limit') or '0')
  local which = 0
  if limit == 0 then
    which = -1
  end
  local first = redis.call('ZRANGE', SLOTS, which, which, 'WITHSCORES')
  if first[1] then
    return {
      math.max(tonumber(first[2]) - NOW, 0),
      flat(redis.call('HGET', HOLDERS, first[1])),
      redis.call('ZCARD', SLOTS),
      limit,
    }
  end
  return {-2, {}, 0, 0}
end

-- ----------------------------------------------------------------------------------------------
