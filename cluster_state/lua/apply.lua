-- One atomic batch of writes. ARGV: prefix, history, ops = ONE msgpack array with 7 items per op:
--   op, kind, field, expect (8-byte RV or ''), blob (object bytes WITHOUT the last 8 RV bytes: the
--   script appends the new RV), status_len, extra
-- (one packed argument instead of 7 per op: the client packs it ~6x faster than separate args)
-- op C create | U update (keep stored status) | T status (keep stored rest) | P put whole
--    | D delete.  extra: for P on a Pod, a deletion deadline to index in the terminating set.
-- The object hash holds, per object, field f = object bytes and field "\0"..f = the length of its
-- packed status (what U/T need to splice), so one HSET stores both.
-- Returns 3 per op: code (0 ok, 404, 4091 exists, 4092 stale RV), rv, blob-or-false.
local history = tonumber(ARGV[2])
local A = cmsgpack.unpack(ARGV[3])
local out = {}
local n = 0
-- validate the whole request before the first write, so a bad one changes nothing
for i = 1, #A - 6, 7 do
  local op, blob = A[i], A[i + 4]
  if op ~= 'C' and op ~= 'U' and op ~= 'T' and op ~= 'P' and op ~= 'D' then
    return redis.error_reply('ERR apply: unknown op ' .. tostring(op))
  end
  if op ~= 'D' and (string.byte(blob, -1) ~= 207 or string.byte(blob, 2) ~= 166) then
    return redis.error_reply('ERR apply: value for ' .. A[i + 1] .. ' ' .. A[i + 2] .. ' is not in stored layout')
  end
end
local nops = math.floor(#A / 7)
local okey, lastkind
for i = 1, #A - 6, 7 do
  local op, kind, f, expect, blob = A[i], A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  if kind ~= lastkind then okey, lastkind = P .. ':obj:' .. kind, kind end
  local old
  if op == 'C' then
    if redis.call('HEXISTS', okey, f) == 1 then old = redis.call('HGET', okey, f) end
  else
    old = redis.call('HGET', okey, f)
  end
  local code, rv, res = 0, 0, false
  if op == 'C' then
    if old then
      code, rv = 4091, rv_of(old)
    else
      rv = next_rv(nops - (i - 1) / 7)
      local new = blob .. rv8(rv)
      redis.call('HSET', okey, f, new, '\0' .. f, A[i + 5])
      emit(kind, rv, 'ADDED', new)
    end
  elseif not old then
    code = 404
  elseif expect ~= '' and string.sub(old, -8) ~= expect then
    code, rv = 4092, rv_of(old)
  elseif op == 'D' then
    rv, res = remove(kind, f, old, nops - (i - 1) / 7)
  else
    rv = next_rv(nops - (i - 1) / 7)
    local new
    if op == 'U' then
      local os = tonumber(redis.call('HGET', okey, '\0' .. f))
      local ns = tonumber(A[i + 5])
      new = string.sub(blob, 1, 8) .. string.sub(old, 9, 8 + os) .. string.sub(blob, 9 + ns) .. rv8(rv)
      redis.call('HSET', okey, f, new)
      res = new
    elseif op == 'T' then
      local os = tonumber(redis.call('HGET', okey, '\0' .. f))
      local ns = tonumber(A[i + 5])
      new = string.sub(old, 1, 8) .. string.sub(blob, 9, 8 + ns) .. string.sub(old, 9 + os, -9) .. rv8(rv)
      redis.call('HSET', okey, f, new, '\0' .. f, ns)
      res = new
    else -- P
      new = blob .. rv8(rv)
      redis.call('HSET', okey, f, new, '\0' .. f, A[i + 5])
      if A[i + 6] ~= '' and kind == 'Pod' then redis.call('ZADD', TERMINATING, A[i + 6], f) end
    end
    emit(kind, rv, 'MODIFIED', new)
  end
  out[n + 1], out[n + 2], out[n + 3] = code, rv, res
  n = n + 3
end
release_rvs()
trim_touched(history)
return out
