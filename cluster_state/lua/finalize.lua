-- ARGV: prefix, history, now, limit. Delete pods whose graceful-deletion deadline has passed.
local history = tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', TERMINATING, '-inf', ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
local okey = P .. ':obj:Pod'
local n = 0
for _, f in ipairs(due) do
  local old = redis.call('HGET', okey, f)
  if old then remove('Pod', f, old, #due - n); n = n + 1
  else redis.call('ZREM', TERMINATING, f) end
end
release_rvs()
trim_touched(history)
return {n, #due}
