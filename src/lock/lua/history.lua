-- distlock history (before common.lua; docs/history.md): a lock's events, recorded by the
-- scripts that already run (acquire, release), so that keeping a history costs no request.
--
-- Keys, under the lock's hash tag (so one Cluster slot holds them with the lock):
--   P{K}:history       stream of events, at most HISTORY_CAP (oldest trimmed), each entry's id
--                      being the Redis server's time; fields: event, key, token (its first 8
--                      characters: a full token is a release capability and is never recorded),
--                      the holder's host, pid, user, command, note, ci_url, kind, and per event
--                      fence, slot, waited_ms, place, held_ms, outcome, why, by_host, by_pid,
--                      by_user, by_command, by_token
--   P{K}:history:held  hash: token -> JSON of a current hold (acquired_at, fence, slot, the
--                      holder's metadata, and handed = '1' for a lock handed to a waiter until
--                      it takes it up), to compute how long it was held and to notice one that
--                      expired; '_w:' .. token -> JSON of a waiter in line (its entry in
--                      P{K}:waiters), to notice one whose place lapsed after the line's keys
--                      expired with it (the '_' keeps distlocks that predate it from reading
--                      it as a hold); '_history_ms' -> how long the history is kept; and
--                      the counters of every event recorded, which the stream's cap does not
--                      trim (`distlock metrics`): '_n:' .. event -> how many; '_wait:' .. LE
--                      and '_hold:' .. LE -> how many waits (acquired) and holds (released,
--                      lost, expired, broken) took at most LE seconds and more than the bound
--                      before LE (H_BUCKETS, '+Inf' the rest), '_wait_ms' and '_hold_ms' ->
--                      their sums; '_ok_ms' -> when a run last succeeded (a released event
--                      with outcome 'exit 0' or none), server ms
-- Both expire _history_ms after the last event; the counters restart at 0 with a new history.
--
-- A history exists once a distlock with --history records into a lock; from then on every
-- distlock that takes the lock records into it, with the flag or without (the scripts check
-- EXISTS), with the last --history given. `distlock log --clear` deletes both keys.
--
-- Recording needs every key of the lock declared (12, see common.lua): a renewal (2 to 4
-- keys) and a Cluster ASK retry (its first key only) never record, nor read these keys.

local H_LOCK = string.match(KEYS[1], '^(.*})')
local H_KEY = string.match(H_LOCK, '{([^{}]*)}$') or H_LOCK
local HISTORY, HELD = H_LOCK .. ':history', H_LOCK .. ':history:held'
local HISTORY_CAP = 1000
local H_DECLARED = #KEYS >= 12
-- Set by a script from its arguments: the --history asked for (ms), the outcome of the work
-- (release), and who breaks the lock (a table of metadata, for `break`).
local H_ARG_MS = nil
local H_OUTCOME = nil
local H_BREAKER = nil
local H_ON = nil
local H_NOW = nil

local function h_now()
  if not H_NOW then
    local t = redis.call('TIME')
    H_NOW = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
  end
  return H_NOW
end

local function h_int(n)
  return string.format('%.0f', n)
end

-- Whether this script records: every key declared, and a history that exists or is asked for.
local function h_on()
  if H_ON == nil then
    H_ON = H_DECLARED and (H_ARG_MS ~= nil or redis.call('EXISTS', HISTORY) == 1)
  end
  return H_ON
end

-- Keep both keys for the history's duration from now (the last one asked for wins).
local function h_touch()
  local ms = H_ARG_MS
  if ms then
    redis.call('HSET', HELD, '_history_ms', h_int(ms))
  else
    ms = tonumber(redis.call('HGET', HELD, '_history_ms') or '')
  end
  if ms then
    redis.call('PEXPIRE', HISTORY, h_int(ms))
    redis.call('PEXPIRE', HELD, h_int(ms))
  end
end

local H_META = {'host', 'pid', 'user', 'command', 'note', 'ci_url', 'kind', 'mode', 'set'}

-- The histograms' bucket bounds: ms, and seconds as the counter's name has them.
local H_BUCKETS = {
  {100, '0.1'}, {1000, '1'}, {10000, '10'}, {60000, '60'}, {300000, '300'}, {900000, '900'},
  {3600000, '3600'}, {14400000, '14400'}, {86400000, '86400'},
}

-- Count event KIND (EXTRA: its fields) beside the stream: the counters in HELD above.
local function h_count(kind, extra)
  redis.call('HINCRBY', HELD, '_n:' .. kind, 1)
  local name, ms = nil, nil
  if kind == 'acquired' then
    name, ms = '_wait', extra.waited_ms
  elseif kind ~= 'gave-up' and kind ~= 'superseded' and not extra.expired then
    -- (A lost hold that the history no longer knew was counted when it was found expired.)
    name, ms = '_hold', extra.held_ms
  end
  ms = tonumber(ms or '')
  if ms then
    local le = '+Inf'
    for _, b in ipairs(H_BUCKETS) do
      if ms <= b[1] then
        le = b[2]
        break
      end
    end
    redis.call('HINCRBY', HELD, name .. ':' .. le, 1)
    redis.call('HINCRBY', HELD, name .. '_ms', h_int(ms))
  end
  if kind == 'released' and (extra.outcome == nil or extra.outcome == 'exit 0') then
    redis.call('HSET', HELD, '_ok_ms', h_int(h_now()))
  end
end

-- Append event KIND about TOKEN (a full token, of which 8 characters are kept) with holder
-- metadata META (a table) and EXTRA (a table of event fields).
local function h_record(kind, token, meta, extra)
  if not h_on() then
    return
  end
  local args = {'XADD', HISTORY, 'MAXLEN', tostring(HISTORY_CAP), '*', 'event', kind, 'key', H_KEY}
  if token then
    args[#args + 1] = 'token'
    args[#args + 1] = string.sub(token, 1, 8)
  end
  for _, f in ipairs(H_META) do
    local v = meta and meta[f]
    if type(v) == 'number' then
      v = h_int(v)
    end
    if type(v) == 'string' then
      args[#args + 1] = f
      args[#args + 1] = v
    end
  end
  for k, v in pairs(extra or {}) do
    if type(v) == 'number' then
      v = h_int(v)
    end
    if type(v) == 'string' then
      args[#args + 1] = k
      args[#args + 1] = v
    end
  end
  redis.call(unpack(args))
  h_count(kind, extra or {})
  h_touch()
end

local function h_decode(json)
  if not json then
    return nil
  end
  local ok, t = pcall(cjson.decode, json)
  if ok and type(t) == 'table' then
    return t
  end
  return nil
end

-- BY: who did something to another (a breaker, a superseder), as by_* fields of EXTRA.
local function h_by(extra, by, token)
  if by then
    for _, f in ipairs({'host', 'pid', 'user', 'command'}) do
      if type(by[f]) == 'string' then
        extra['by_' .. f] = by[f]
      end
    end
  end
  if token then
    extra.by_token = string.sub(token, 1, 8)
  end
  return extra
end

-- A waiter (TOKEN, its entry in line WAITER) whose place lapsed at DEADLINE (server ms): its
-- process stopped keeping it (killed, stopped, cut off), and the script purging the line
-- records it as 'gave-up', why 'lapsed'. It waited until the lapse at most: its last refresh
-- was a place's length (6s, 3s when it polls) before.
local function h_lapsed(token, waiter, deadline)
  if not h_on() then
    return
  end
  local w = h_decode(waiter) or {}
  local since = tonumber(w.since or '')
  h_record('gave-up', token, w, {
    waited_ms = since and h_int(math.max(deadline - since, 0)) or nil,
    place = w.place, why = 'lapsed',
  })
end

-- TOKEN joined the line (its entry WAITER): remembered until it leaves it (h_left_line).
local function h_waiting(token, waiter)
  if not h_on() then
    return
  end
  redis.call('HSET', HELD, '_w:' .. token, waiter)
  h_touch()
end

-- TOKEN left the line (granted, gave up, superseded, purged): recorded already, if at all.
local function h_left_line(token)
  if h_on() then
    redis.call('HDEL', HELD, '_w:' .. token)
  end
end

-- Holds that ended without a release (the holder vanished, its lock expired): record each as
-- 'expired', noticed now, by whoever runs next; a lock handed to a waiter that never took it
-- up (it died in line: the take-up window lapsed) with why 'not-taken-up'. And waiters that
-- are no longer in line without having left it: the line's keys expire with the last place
-- (see expire_with in common.lua), so a dead waiter alone in line is purged by nobody; it is
-- recorded here as 'gave-up', why 'lapsed', waited_ms up to now (an upper bound). Run before
-- anything is granted or released.
local function h_sweep()
  if not h_on() then
    return
  end
  local now = h_now()
  local all = redis.call('HGETALL', HELD)
  for i = 1, #all, 2 do
    local token = all[i]
    if string.sub(token, 1, 3) == '_w:' then
      token = string.sub(token, 4)
      if not redis.call('ZSCORE', H_LOCK .. ':queue', token) then
        redis.call('HDEL', HELD, all[i])
        -- (Granted without a record: a script after a Cluster ASK, which records nothing.)
        local holds = redis.call('GET', H_LOCK) == token
          or redis.call('ZSCORE', H_LOCK .. ':slots', token)
        if not holds then
          h_lapsed(token, all[i + 1], now)
        end
      end
    elseif string.sub(token, 1, 1) ~= '_' then
      local live = redis.call('GET', H_LOCK) == token
      if not live then
        local score = redis.call('ZSCORE', H_LOCK .. ':slots', token)
        live = score and tonumber(score) > now
      end
      if not live then
        local held = h_decode(all[i + 1]) or {}
        redis.call('HDEL', HELD, token)
        h_record('expired', token, held, {
          fence = held.fence, slot = held.slot,
          held_ms = h_int(now - (tonumber(held.acquired_at or '') or now)),
          why = held.handed == '1' and 'not-taken-up' or nil,
        })
      end
    end
  end
end

-- TOKEN was granted the lock (FENCE; SLOT: a semaphore's index or nil) with metadata INFO;
-- WAITER: its entry in line (JSON) or nil, for how long it waited and its place when it joined;
-- HANDED: handed to it by a hand-off, until it takes it up (see h_taken_up).
local function h_acquired(token, fence, slot, info, waiter, handed)
  if not h_on() then
    return
  end
  local now = h_now()
  local w = h_decode(waiter) or {}
  local since = tonumber(w.since or '')
  local held = {acquired_at = h_int(now), fence = h_int(fence)}
  for _, f in ipairs(H_META) do
    if type(info[f]) == 'string' then
      held[f] = info[f]
    end
  end
  local extra = {fence = h_int(fence), waited_ms = h_int(since and (now - since) or 0)}
  if slot then
    held.slot = tostring(slot)
    extra.slot = tostring(slot)
  end
  if w.place then
    extra.place = tostring(w.place)
  end
  if handed then
    held.handed = '1'
  end
  redis.call('HSET', HELD, token, cjson.encode(held))
  h_record('acquired', token, held, extra)
end

-- TOKEN took up a lock handed to it: should its hold expire, it was a hold.
local function h_taken_up(token)
  if not h_on() then
    return
  end
  local held = h_decode(redis.call('HGET', HELD, token))
  if held and held.handed then
    held.handed = nil
    redis.call('HSET', HELD, token, cjson.encode(held))
  end
end

-- TOKEN's hold ended by a release (or a break, when H_BREAKER is set).
local function h_released(token)
  if not h_on() then
    return
  end
  local now = h_now()
  local held = h_decode(redis.call('HGET', HELD, token)) or {}
  redis.call('HDEL', HELD, token)
  local extra = {
    fence = held.fence, slot = held.slot,
    held_ms = held.acquired_at and h_int(now - tonumber(held.acquired_at)) or nil,
  }
  if H_BREAKER then
    h_record('broken', token, held, h_by(extra, H_BREAKER, nil))
  else
    extra.outcome = H_OUTCOME
    h_record('released', token, held, extra)
  end
end

-- A waiter (TOKEN, its entry in line WAITER) left the line: KIND 'gave-up' (it stopped
-- waiting) or 'superseded' (by BY, a table, whose token is BY_TOKEN).
local function h_left(kind, token, waiter, by, by_token)
  if not h_on() then
    return
  end
  local w = h_decode(waiter) or {}
  local since = tonumber(w.since or '')
  local extra = {waited_ms = since and h_int(h_now() - since) or nil, place = w.place}
  if kind == 'superseded' then
    h_by(extra, by, by_token)
  end
  h_record(kind, token, w, extra)
end
