-- ARGV: prefix, kind. The objects and the RV they are consistent with, read atomically.
return {tonumber(redis.call('GET', RVKEY) or '0'), redis.call('HGETALL', P .. ':obj:' .. ARGV[2])}
