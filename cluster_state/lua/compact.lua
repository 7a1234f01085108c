-- ARGV: prefix, kind, up_to_rv. Drop the kind's history up to (and including) up_to_rv, capped at
-- the current RV; watches from an older RV then get 410. Returns the compacted point.
local cur = tonumber(redis.call('GET', RVKEY) or '0')
local up = math.min(tonumber(ARGV[3]), cur)
redis.call('XTRIM', P .. ':ev:' .. ARGV[2], 'MINID', string.format('%d', up + 1))
local c = tonumber(redis.call('HGET', COMPACTED, ARGV[2]) or '0')
if up > c then redis.call('HSET', COMPACTED, ARGV[2], up); c = up end
return c
