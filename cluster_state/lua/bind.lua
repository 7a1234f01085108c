-- pods/binding for many pods, read-modify-write INSIDE Redis (no client round trip, no RV race).
-- ARGV: prefix, history, args = ONE msgpack array:
--   cond (the packed PodScheduled condition to append), clear_nnn (1/0), then 3 per binding:
--   field ("ns/name"), node name, uid precondition (false = none)
-- The stored bytes are never decoded and re-encoded as a whole (cmsgpack would lose key order,
-- empty maps vs arrays, nils, int-valued floats, bin strings and uint64): cmsgpack.unpack_one only
-- walks map entries to find byte offsets (and reads metadata), and the new object is spliced from
-- the old bytes -- byte for byte what msgpack-python packs for the Python binder's result
-- (Store._bind_pod; tests/cluster_state/test_api_bind_lua.py compares the two). Shapes it does not
-- handle (non-map spec/status, odd types, bin strings) return 422: the client binds those.
-- Returns 3 per binding: code, rv|reason, new object|detail
--   0 ok | 404 not found | 409 conflict (reason 1 uid: detail = stored uid; 2 deleting;
--   3 already bound: detail = node; 4 non-empty spec.schedulingGates) | 422 unusual shape: the
--   client binds that pod itself.
local history = tonumber(ARGV[2])
local A = cmsgpack.unpack(ARGV[3])
local COND, CLEAR = A[1], A[2] == 1
local unpack_one = cmsgpack.unpack_one
local byte, sub, char = string.byte, string.sub, string.char
local okey = P .. ':obj:Pod'

-- offsets are 0-based (cmsgpack's), a range [a, b) is sub(s, a + 1, b)
local function map_header(s, pos)
  local b = byte(s, pos + 1)
  if b >= 0x80 and b <= 0x8f then return b - 0x80, 1 end
  if b == 0xde then local h, l = byte(s, pos + 2, pos + 3); return h * 256 + l, 3 end
  return nil
end
local function array_header(s, pos)
  local b = byte(s, pos + 1)
  if b >= 0x90 and b <= 0x9f then return b - 0x90, 1 end
  if b == 0xdc then local h, l = byte(s, pos + 2, pos + 3); return h * 256 + l, 3 end
  return nil
end
local function pack_header(n, fix, b16)
  if n < 16 then return char(fix + n) end
  if n < 65536 then return char(b16) .. struct.pack('>I2', n) end
  error('too many entries')
end
-- offset after the value at p: scalars by their header, containers by cmsgpack (one C call
-- walks a whole subtree)
local function skip(s, p)
  local b = byte(s, p + 1)
  if b < 0x80 or b >= 0xe0 or b == 0xc0 or b == 0xc2 or b == 0xc3 then return p + 1 end
  if b >= 0xa0 and b <= 0xbf then return p + 1 + b - 0xa0 end
  if b == 0xd9 then return p + 2 + byte(s, p + 2) end
  if b == 0xcb or b == 0xcf or b == 0xd3 then return p + 9 end
  if b == 0xcc or b == 0xd0 then return p + 2 end
  if b == 0xcd or b == 0xd1 then return p + 3 end
  if b == 0xce or b == 0xd2 or b == 0xca then return p + 5 end
  local q = unpack_one(s, p)
  if q < 0 then q = #s end
  return q
end
-- a string value at p: the string, or nil for msgpack nil, or false for anything else
local function str_at(s, p)
  local b = byte(s, p + 1)
  if b >= 0xa0 and b <= 0xbf then return sub(s, p + 2, p + 1 + b - 0xa0) end
  if b == 0xd9 then return sub(s, p + 3, p + 2 + byte(s, p + 2)) end
  if b == 0xc0 then return nil end
  return false
end

local function bind_one(old, node, uid)
  if sub(old, 2, 8) ~= '\166status' then return 422 end
  local ntop = byte(old, 1) - 0x80
  -- status: where conditions and nominatedNodeName are
  local st_n, st_h = map_header(old, 8)
  if not st_n then return 422 end
  local p = 8 + st_h
  local cv, ce, nv, ne
  for _ = 1, st_n do
    local k, v, e
    v, k = unpack_one(old, p)
    e = unpack_one(old, v)
    if k == 'conditions' then cv, ce = v, e
    elseif k == 'nominatedNodeName' then nv, ne = v, e end
    p = e
  end
  local st_end = p
  -- the other top-level fields: spec (where nodeName is) and metadata (uid, deletionTimestamp)
  local sp, sp_end, sp_n, sp_h, nnv, nne, sgv, md_uid, md_del, md
  for _ = 2, ntop do
    local v, k = unpack_one(old, p)
    if k == 'spec' then
      sp = v
      sp_n, sp_h = map_header(old, v)
      if not sp_n then return 422 end
      p = v + sp_h
      for _ = 1, sp_n do
        local v2, k2 = unpack_one(old, p)
        local e = unpack_one(old, v2)
        if k2 == 'nodeName' then nnv, nne = v2, e
        elseif k2 == 'schedulingGates' then sgv = v2 end
        p = e
      end
      sp_end = p
    elseif k == 'metadata' then
      p, md = unpack_one(old, v)
      if type(md) ~= 'table' then return 422 end
      md_uid, md_del = md.uid, md.deletionTimestamp
    else
      p = unpack_one(old, v)
    end
  end
  if not sp or not md then return 422 end
  -- preconditions, in the order of the Python binder
  if uid ~= false and md_uid ~= uid then
    if md_uid ~= nil and type(md_uid) ~= 'string' then return 422 end
    return 409, 1, md_uid == nil and false or md_uid
  end
  if md_del ~= nil then return 409, 2, false end
  if nnv then
    local b = byte(old, nnv + 1)
    if b ~= 0xa0 and b ~= 0xc0 then
      local cur = str_at(old, nnv)
      if not cur then return 422 end
      return 409, 3, cur
    end
  end
  if sgv then   -- "Reject binding to a scheduling un-ready Pod"
    local b = byte(old, sgv + 1)
    if b ~= 0x90 and b ~= 0xc0 then
      if b > 0x90 and b <= 0x9f then return 409, 4, false end
      return 422
    end
  end
  -- new status
  local parts, last = {}, 8 + st_h
  local edits = {}
  local cond_new = '\145' .. COND
  if cv then
    local b = byte(old, cv + 1)
    if b ~= 0xc0 and b ~= 0x90 then
      local n, h = array_header(old, cv)
      if not n then return 422 end
      local keep, q = {}, cv + h
      for _ = 1, n do
        local q2 = skip(old, q)
        local drop = false
        if map_header(old, q) then
          local _, e = unpack_one(old, q)
          drop = e.type == 'PodScheduled'
        end
        if not drop then keep[#keep + 1] = sub(old, q + 1, q2) end
        q = q2
      end
      cond_new = pack_header(#keep + 1, 0x90, 0xdc) .. table.concat(keep) .. COND
    end
    edits[1] = {cv, ce, cond_new}
  end
  if CLEAR and nv then
    local b = byte(old, nv + 1)
    if b ~= 0xa0 and b ~= 0xc0 then
      if str_at(old, nv) == false then return 422 end
      edits[#edits + 1] = {nv, ne, '\160'}
    end
  end
  if #edits == 2 and edits[2][1] < edits[1][1] then edits[1], edits[2] = edits[2], edits[1] end
  for _, e in ipairs(edits) do
    parts[#parts + 1] = sub(old, last + 1, e[1])
    parts[#parts + 1] = e[3]
    last = e[2]
  end
  parts[#parts + 1] = sub(old, last + 1, st_end)
  if not cv then
    st_n = st_n + 1
    parts[#parts + 1] = '\170conditions' .. cond_new
  end
  local status = pack_header(st_n, 0x80, 0xde) .. table.concat(parts)
  -- new spec
  local spec
  if nnv then
    spec = sub(old, sp + 1, nnv) .. cmsgpack.pack(node) .. sub(old, nne + 1, sp_end)
  else
    spec = pack_header(sp_n + 1, 0x80, 0xde) .. sub(old, sp + sp_h + 1, sp_end) .. '\168nodeName' .. cmsgpack.pack(node)
  end
  return 0, status, sub(old, 1, 8) .. status .. sub(old, st_end + 1, sp) .. spec .. sub(old, sp_end + 1, -9)
end

-- one HMGET for all pods and one HSET for all new values (a redis.call costs more than the
-- parsing of a pod); a pod named twice sees its first binding
local out, n = {}, 0
local nb = (#A - 2) / 3
if nb < 1 then return out end
local fields = {}
for j = 0, nb - 1 do fields[j + 1] = A[3 + 3 * j] end
local olds = redis.call('HMGET', okey, unpack(fields))
local written, hset, nh = {}, {}, 0
for j = 0, nb - 1 do
  local f, node, uid = A[3 + 3 * j], A[4 + 3 * j], A[5 + 3 * j]
  local old = written[f] or olds[j + 1]
  local code, a, b = 404, 0, false
  if old then
    local ok, c, x, y = pcall(bind_one, old, node, uid)
    if not ok then
      code = 422
    elseif c == 0 then
      local rv = next_rv(nb - j)
      local new = y .. rv8(rv)
      written[f] = new
      hset[nh + 1], hset[nh + 2], hset[nh + 3], hset[nh + 4] = f, new, '\0' .. f, #x
      nh = nh + 4
      emit('Pod', rv, 'MODIFIED', new)
      code, a, b = 0, rv, new
    else
      code, a, b = c, x or 0, y or false
    end
  end
  out[n + 1], out[n + 2], out[n + 3] = code, a, b
  n = n + 3
end
if nh > 0 then redis.call('HSET', okey, unpack(hset)) end
release_rvs()
trim_touched(history)
return out
