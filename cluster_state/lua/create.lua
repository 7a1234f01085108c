-- The single-create fast path (what apply.lua's op C does, without unpacking an op list).
-- ARGV: prefix, history, kind, field, blob (stored layout WITHOUT its 8 RV bytes), status_len.
-- Returns {0, rv} or {4091, rv of the existing object}.
local kind, f, blob = ARGV[3], ARGV[4], ARGV[5]
if string.byte(blob, -1) ~= 207 or string.byte(blob, 2) ~= 166 then
  return redis.error_reply('ERR create: value for ' .. kind .. ' ' .. f .. ' is not in stored layout')
end
local okey = P .. ':obj:' .. kind
if redis.call('HEXISTS', okey, f) == 1 then
  return {4091, rv_of(redis.call('HGET', okey, f))}
end
local rv = next_rv(1)
local new = blob .. rv8(rv)
redis.call('HSET', okey, f, new, '\0' .. f, ARGV[6])
emit(kind, rv, 'ADDED', new)
trim_touched(tonumber(ARGV[2]))
return {0, rv}
