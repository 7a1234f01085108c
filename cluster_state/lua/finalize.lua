-- ARGV: prefix, history, now, limit. Pods whose graceful-deletion deadline has passed: removed
-- (DELETED), unless they still have finalizers -- then, as after the kubelet's final delete with
-- grace 0, they stay with deletionGracePeriodSeconds = 0 (one MODIFIED, if it was not 0 yet) and
-- go when an update removes the last finalizer. Either way they leave the terminating set.
-- Returns {removed, due, kept}.
local history = tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', TERMINATING, '-inf', ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
local okey = P .. ':obj:Pod'
local unpack_one, byte, sub = cmsgpack.unpack_one, string.byte, string.sub

-- finalizers present?, and the byte range [v, e) of metadata.deletionGracePeriodSeconds (or nil),
-- found by walking map entries (stored layout: status first, metadata last; see codec.py)
local function deletion_state(old)
  local p = unpack_one(old, 8)            -- skip the status value
  for _ = 2, byte(old, 1) - 0x80 do
    local v, k = unpack_one(old, p)
    if k == 'metadata' then
      local b = byte(old, v + 1)
      local n, q
      if b >= 0x80 and b <= 0x8f then n, q = b - 0x80, v + 1
      elseif b == 0xde then n, q = byte(old, v + 2) * 256 + byte(old, v + 3), v + 3
      else return false end
      local has, dv, de = false, nil, nil
      for _ = 1, n do
        local v2, k2 = unpack_one(old, q)
        local e2 = unpack_one(old, v2)
        if e2 < 0 then e2 = #old end
        if k2 == 'finalizers' then
          local fb = byte(old, v2 + 1)
          has = (fb > 0x90 and fb <= 0x9f) or ((fb == 0xdc or fb == 0xdd) and e2 - v2 > 3)
        elseif k2 == 'deletionGracePeriodSeconds' then
          dv, de = v2, e2
        end
        q = e2
      end
      return has, dv, de
    end
    p = unpack_one(old, v)
  end
  return false
end

local removed, kept, writes = 0, 0, 0
for _, f in ipairs(due) do
  local old = redis.call('HGET', okey, f)
  if not old then
    redis.call('ZREM', TERMINATING, f)
  else
    local ok, has, dv, de = pcall(deletion_state, old)
    if ok and has then
      redis.call('ZREM', TERMINATING, f)
      kept = kept + 1
      if dv and byte(old, dv + 1) ~= 0 then
        local rv = next_rv(#due - writes)
        writes = writes + 1
        local new = sub(old, 1, dv) .. '\0' .. sub(old, de + 1, -9) .. rv8(rv)
        redis.call('HSET', okey, f, new)
        emit('Pod', rv, 'MODIFIED', new)
      end
    else
      remove('Pod', f, old, #due - writes)
      writes = writes + 1
      removed = removed + 1
    end
  end
end
release_rvs()
trim_touched(history)
return {removed, #due, kept}
