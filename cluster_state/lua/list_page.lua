-- Paged list (limit / continue), every page consistent at the first page's resourceVersion.
-- The first page reads the kind at the current RV and, if more pages follow, keeps a snapshot of
-- it: <snap>:idx (zset of the matching keys, score 0: ZRANGEBYLEX orders bytewise, whatever the
-- server's locale) and <snap>:obj (COPY of the kind's hash). Later pages read the snapshot, so
-- writes in between never show up; the snapshot is dropped with the last page or after ttl
-- seconds unused. A page whose RV the kind's history no longer covers (compacted) is 410.
--
-- ARGV[2] = 'first': prefix, 'first', kind, ns_prefix ('' = all), after ('' = from the start),
--   limit (0 = all), min_rv (504 if the current RV is lower), exact_rv (0 = any; else 409 when the
--   current RV differs: the client rebuilds that state from history), snap, ttl
-- ARGV[2] = 'next': prefix, 'next', kind, snap, rv, after, limit, ttl
-- Returns {0, rv, keys, values, remaining} | {504, current} | {409, current} | {410, compacted}
local mode = ARGV[2]

local function hmget(key, ks)
  local out = {}
  for i = 1, #ks, 1000 do
    local part = redis.call('HMGET', key, unpack(ks, i, math.min(i + 999, #ks)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end

-- the page after `after` from a snapshot; drops the snapshot when nothing follows
local function page(snap, after, limit, ttl, vals)
  local idx, obj = snap .. ':idx', snap .. ':obj'
  local lo = after == '' and '-' or ('(' .. after)
  local ks
  if limit > 0 then
    ks = redis.call('ZRANGEBYLEX', idx, lo, '+', 'LIMIT', 0, limit)
  else
    ks = redis.call('ZRANGEBYLEX', idx, lo, '+')
  end
  local vs
  if vals then
    vs = {}
    for i = 1, #ks do vs[i] = vals[ks[i]] end
  else
    vs = hmget(obj, ks)
  end
  local rest = 0
  if #ks > 0 then rest = redis.call('ZLEXCOUNT', idx, '(' .. ks[#ks], '+') end
  return ks, vs, rest
end

if mode == 'next' then
  local kind, snap, rv, after, limit, ttl = ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), ARGV[8]
  local c = tonumber(redis.call('HGET', COMPACTED, kind) or '0')
  if c > rv then return {410, c} end
  if redis.call('EXISTS', snap .. ':idx') == 0 then return {410, -1} end
  local ks, vs, rest = page(snap, after, limit, ttl, nil)
  if rest == 0 then
    redis.call('DEL', snap .. ':idx', snap .. ':obj')
  else
    redis.call('EXPIRE', snap .. ':idx', ttl)
    redis.call('EXPIRE', snap .. ':obj', ttl)
  end
  return {0, rv, ks, vs, rest}
end

local kind, pre, after = ARGV[3], ARGV[4], ARGV[5]
local limit, minrv, exact = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local snap, ttl = ARGV[9], ARGV[10]
local cur = tonumber(redis.call('GET', RVKEY) or '0')
if cur < minrv then return {504, cur} end
if exact > 0 and exact ~= cur then return {409, cur} end
local okey = P .. ':obj:' .. kind
local flat = redis.call('HGETALL', okey)
local keys, vals, npre = {}, {}, #pre
for i = 1, #flat, 2 do
  local k = flat[i]
  if string.byte(k, 1) ~= 0 and (npre == 0 or string.sub(k, 1, npre) == pre) then
    keys[#keys + 1] = k
    vals[k] = flat[i + 1]
  end
end
if #keys == 0 then return {0, cur, {}, {}, 0} end
if after == '' and (limit == 0 or #keys <= limit) then
  -- one page holds it all: no snapshot (the client sorts the page)
  local vs = {}
  for i = 1, #keys do vs[i] = vals[keys[i]] end
  return {0, cur, keys, vs, 0}
end
local idx = snap .. ':idx'
redis.call('DEL', idx, snap .. ':obj')
for i = 1, #keys, 500 do
  local args = {}
  for j = i, math.min(i + 499, #keys) do
    args[#args + 1] = 0
    args[#args + 1] = keys[j]
  end
  redis.call('ZADD', idx, unpack(args))
end
local ks, vs, rest = page(snap, after, limit, ttl, vals)
if rest == 0 then
  redis.call('DEL', idx)
else
  redis.call('COPY', okey, snap .. ':obj')
  redis.call('EXPIRE', idx, ttl)
  redis.call('EXPIRE', snap .. ':obj', ttl)
end
return {0, cur, ks, vs, rest}
