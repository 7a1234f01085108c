-- Shared prelude, prepended to every script by store.py.
-- ARGV[1] is the key prefix: keys are built here rather than declared (single Redis, not Cluster).
local P = ARGV[1]
local RVKEY = P .. ':rv'
local COMPACTED = P .. ':compacted'
local TERMINATING = P .. ':terminating'

-- RVs are reserved with one INCRBY at the first write (for it and every op after it) and the unused
-- ones handed back at the end: nobody can observe the counter in between, and if the script dies
-- half-way the counter stays ahead of every RV used (a gap, never a reuse). One counter write per
-- script instead of an INCR per write; a failed single write touches nothing.
local RV_BASE, RV_USED, RV_RESERVED = 0, 0, 0
local function next_rv(remaining)
  if RV_RESERVED == 0 then
    RV_BASE = redis.call('INCRBY', RVKEY, remaining) - remaining
    RV_RESERVED = remaining
  end
  if RV_USED >= RV_RESERVED then error('rv reservation exceeded') end
  RV_USED = RV_USED + 1
  return RV_BASE + RV_USED
end
local function release_rvs()
  if RV_USED < RV_RESERVED then redis.call('DECRBY', RVKEY, RV_RESERVED - RV_USED) end
end

local function rv8(n) return struct.pack('>I8', n) end
local function rv_of(blob) return (struct.unpack('>I8', string.sub(blob, -8))) end

-- Append a watch event with ID <rv>-0. Trimming is checked once per script (trim_touched), not
-- per event: XLEN and XTRIM per write would cost more than the rest of a batched bind.
local TOUCHED = {}   -- kind -> its stream key
local function emit(kind, rv, typ, blob)
  local sk = TOUCHED[kind]
  if not sk then sk = P .. ':ev:' .. kind; TOUCHED[kind] = sk end
  redis.call('XADD', sk, string.format('%d-0', rv), 't', typ, 'o', blob)
end

-- Trim each touched kind's history in chunks; every trim records the new compacted point so
-- watches from older RVs get 410.
local function trim_touched(history)
  for kind, sk in pairs(TOUCHED) do
    if redis.call('XLEN', sk) > history + math.max(1, math.floor(history / 16)) then
      redis.call('XTRIM', sk, 'MAXLEN', history)
      local first = redis.call('XRANGE', sk, '-', '+', 'COUNT', 1)
      local frv = tonumber(string.match(first[1][1], '^(%d+)'))
      local c = tonumber(redis.call('HGET', COMPACTED, kind) or '0')
      if frv - 1 > c then redis.call('HSET', COMPACTED, kind, frv - 1) end
    end
  end
end

-- Remove a stored object; the DELETED event carries its last state stamped with the deletion RV.
local function remove(kind, f, old, remaining)
  local rv = next_rv(remaining)
  local last = string.sub(old, 1, -9) .. rv8(rv)
  redis.call('HDEL', P .. ':obj:' .. kind, f, '\0' .. f)
  if kind == 'Pod' then redis.call('ZREM', TERMINATING, f) end
  emit(kind, rv, 'DELETED', last)
  return rv, last
end
