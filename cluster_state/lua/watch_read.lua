-- ARGV: prefix, kind, rv, first id to read (rv+1), count.
-- Atomic: Gone check, then events after rv, else the current global RV. Because both reads happen
-- in one script, a bookmark at the returned RV can never skip an event of this kind.
local c = redis.call('HGET', COMPACTED, ARGV[2])
if c and tonumber(c) > tonumber(ARGV[3]) then return {-1, tonumber(c)} end
local ev = redis.call('XRANGE', P .. ':ev:' .. ARGV[2], ARGV[4], '+', 'COUNT', ARGV[5])
if #ev > 0 then return {0, ev} end
return {1, tonumber(redis.call('GET', RVKEY) or '0')}
