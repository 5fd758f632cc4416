"""The Lua scripts of the Redis saver: every write is one script, atomic on its thread's slot.

Key names are built inside the scripts from the thread's prefix; KEYS[1] is always the
thread's meta key, so the call is routed to the slot every other touched key shares.
"""

from __future__ import annotations

import hashlib

from checkpoints.store.redis.keys import (
    BLOBS,
    INDEX,
    META,
    NAMESPACES,
    RECORDS,
    WRITE_INDEX,
    WRITES,
)

# The key suffixes, from keys.py: the scripts build a thread's key names as Python does.
_LUA_KEYS = (
    f"local META, NAMESPACES = '{META}', '{NAMESPACES}'\n"
    f"local INDEX, RECORDS, BLOBS = '{INDEX}', '{RECORDS}', '{BLOBS}'\n"
    f"local WRITES, WRITE_INDEX = '{WRITES}', '{WRITE_INDEX}'\n"
    "local KINDS = {INDEX, RECORDS, BLOBS, WRITES, WRITE_INDEX}\n"
)

_LUA_COMMON = (
    _LUA_KEYS
    + r"""
local function item(s, i)
  local c = string.find(s, ':', i, true)
  local n = tonumber(string.sub(s, i, c - 1))
  return string.sub(s, c + 1, c + n), c + n + 1
end
local function items(s)
  local out, i = {}, 1
  while i <= #s do
    local v
    v, i = item(s, i)
    out[#out + 1] = v
  end
  return out
end
local function chunked(cmd, key, list)
  local out = {}
  for s = 1, #list, 1000 do
    local r = redis.call(cmd, key, unpack(list, s, math.min(s + 999, #list)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do out[#out + 1] = v end
    end
  end
  return out
end
local function ttl_for(p, default)
  local wm = redis.call('HGET', p .. META, 'wm')
  if wm then return tonumber(wm) * 60000 end
  return tonumber(default)
end
local function expire_all(p, ttl)
  redis.call('PEXPIRE', p .. META, ttl)
  redis.call('PEXPIRE', p .. NAMESPACES, ttl)
  for _, ns in ipairs(redis.call('SMEMBERS', p .. NAMESPACES)) do
    for _, kind in ipairs(KINDS) do redis.call('PEXPIRE', p .. kind .. ns, ttl) end
  end
end
local function touch_meta(p, id, now)
  local m = p .. META
  redis.call('HSET', m, 'id', id)
  redis.call('HSETNX', m, 'ca', now)
  redis.call('HSETNX', m, 'lw', now)
  redis.call('HSETNX', m, 'v', 1)
end
"""
)

# ARGV: prefix, default ttl ms, ns, checkpoint id, record, now ms, thread id, owner, then
# (blob field, blob value) pairs from ARGV[first]. Returns how many checkpoints the
# namespace holds.
_LUA_PUT_CHECKPOINT = r"""
local function put_checkpoint(first)
  local p, nh, cid = ARGV[1], ARGV[3], ARGV[4]
  touch_meta(p, ARGV[7], ARGV[6])
  redis.call('HSET', p .. META, 'lw', ARGV[6])
  if ARGV[8] ~= '' then redis.call('HSETNX', p .. META, 'o', ARGV[8]) end
  redis.call('SADD', p .. NAMESPACES, nh)
  redis.call('ZADD', p .. INDEX .. nh, 0, cid)
  redis.call('HSET', p .. RECORDS .. nh, cid, ARGV[5])
  for j = first, #ARGV, 2 do redis.call('HSETNX', p .. BLOBS .. nh, ARGV[j], ARGV[j + 1]) end
  expire_all(p, ttl_for(p, ARGV[2]))
  return redis.call('ZCARD', p .. INDEX .. nh)
end
"""

_LUA_PUT = _LUA_PUT_CHECKPOINT + "return put_checkpoint(9)\n"

# A rollback's put: PUT's ARGV, the expected version (or '') at ARGV[9], blob pairs from
# ARGV[10]. The version is checked before anything is written and bumped after the put, in
# this one script, so no other write to the thread lands between them (the version of a
# thread without meta is 0, as `thread_version` reads it). Returns {0, version} when the
# version is not the expected one (nothing written), else {1, checkpoints in the
# namespace, the new version}.
_LUA_PUT_HEAD = (
    _LUA_PUT_CHECKPOINT
    + r"""
local m = ARGV[1] .. META
if ARGV[9] ~= '' then
  local v = redis.call('HGET', m, 'v') or '0'
  if v ~= ARGV[9] then return {0, tonumber(v)} end
end
local size = put_checkpoint(10)
return {1, size, redis.call('HINCRBY', m, 'v', 1)}
"""
)

# ARGV: prefix, default ttl ms, ns, now ms, thread id, then (field, value, overwrite) triples.
_LUA_PUT_WRITES = r"""
local p, nh = ARGV[1], ARGV[3]
touch_meta(p, ARGV[5], ARGV[4])
-- A write moves the thread's last write, so a sweep that judged it before keeps it.
redis.call('HSET', p .. META, 'lw', ARGV[4])
redis.call('SADD', p .. NAMESPACES, nh)
local w, x = p .. WRITES .. nh, p .. WRITE_INDEX .. nh
for j = 6, #ARGV, 3 do
  if ARGV[j + 2] == '1' then
    redis.call('HSET', w, ARGV[j], ARGV[j + 1])
    redis.call('ZADD', x, 0, ARGV[j])
  elseif redis.call('HSETNX', w, ARGV[j], ARGV[j + 1]) == 1 then
    redis.call('ZADD', x, 0, ARGV[j])
  end
end
expire_all(p, ttl_for(p, ARGV[2]))
return 1
"""

# ARGV: prefix, ns, checkpoint id ('' = the newest).
# Returns {id, record, blob values, write fields, write values} or nil.
_LUA_READ = r"""
local p, nh, cid = ARGV[1], ARGV[2], ARGV[3]
if cid == '' then
  local r = redis.call('ZRANGE', p .. INDEX .. nh, '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, 1)
  if #r == 0 then return false end
  cid = r[1]
end
local rec = redis.call('HGET', p .. RECORDS .. nh, cid)
if not rec then return false end
local fields = items((item(rec, 1)))
local blobs = chunked('HMGET', p .. BLOBS .. nh, fields)
local pre = tostring(#cid) .. ':' .. cid
local wf = redis.call('ZRANGE', p .. WRITE_INDEX .. nh, '[' .. pre, '[' .. pre .. '\255', 'BYLEX')
local wv = chunked('HMGET', p .. WRITES .. nh, wf)
return {cid, rec, blobs, wf, wv}
"""

# ARGV: prefix. Returns {checkpoints, writes} the thread holds.
_LUA_COUNT = r"""
local p = ARGV[1]
local c, w = 0, 0
for _, ns in ipairs(redis.call('SMEMBERS', p .. NAMESPACES)) do
  c = c + redis.call('ZCARD', p .. INDEX .. ns)
  w = w + redis.call('HLEN', p .. WRITES .. ns)
end
return {c, w}
"""

# ARGV: prefix. Drops every key of the thread.
_LUA_DELETE = r"""
local p = ARGV[1]
for _, ns in ipairs(redis.call('SMEMBERS', p .. NAMESPACES)) do
  for _, kind in ipairs(KINDS) do redis.call('DEL', p .. kind .. ns) end
end
redis.call('DEL', p .. NAMESPACES, p .. META)
return 1
"""

# ARGV: prefix, the last write (ms) the sweep judged the thread on, '' when it found no
# meta. Drops every key of the thread only if its last write is still that one (a put sets
# 'lw' in its own script, so it lands wholly before or after this check). Returns 1 when
# the thread was dropped, 0 when it was kept as written since.
_LUA_DELETE_UNWRITTEN = r"""
local p = ARGV[1]
local lw = redis.call('HGET', p .. META, 'lw')
if (lw or '') ~= ARGV[2] then return 0 end
for _, ns in ipairs(redis.call('SMEMBERS', p .. NAMESPACES)) do
  for _, kind in ipairs(KINDS) do redis.call('DEL', p .. kind .. ns) end
end
redis.call('DEL', p .. NAMESPACES, p .. META)
return 1
"""

# ARGV: prefix, ns, then checkpoint ids. Drops them with their writes, then every blob no
# remaining checkpoint refers to, in one step so a concurrent put cannot lose a blob.
_LUA_DROP = r"""
local p, nh = ARGV[1], ARGV[2]
local i, c, b, w, x = p .. INDEX .. nh, p .. RECORDS .. nh, p .. BLOBS .. nh, p .. WRITES .. nh,
  p .. WRITE_INDEX .. nh
local dropped, gone = 0, {}
for j = 3, #ARGV do
  local cid = ARGV[j]
  dropped = dropped + redis.call('HDEL', c, cid)
  gone[cid] = true
  redis.call('ZREM', i, cid)
  local pre = tostring(#cid) .. ':' .. cid
  local wf = redis.call('ZRANGE', x, '[' .. pre, '[' .. pre .. '\255', 'BYLEX')
  chunked('HDEL', w, wf)
  chunked('ZREM', x, wf)
end
local keep = {}
local kept = redis.call('HGETALL', c)
for k = 1, #kept, 2 do
  local rec = kept[k + 1]
  for _, f in ipairs(items((item(rec, 1)))) do keep[f] = true end
  -- A kept checkpoint whose parent went has none (its record's second part).
  local parts = items(rec)
  if parts[2] ~= '' and gone[parts[2]] then
    parts[2] = ''
    local out = {}
    for n, part in ipairs(parts) do out[n] = tostring(#part) .. ':' .. part end
    redis.call('HSET', c, kept[k], table.concat(out))
  end
end
local stale = {}
for _, f in ipairs(redis.call('HKEYS', b)) do
  if not keep[f] then stale[#stale + 1] = f end
end
chunked('HDEL', b, stale)
return dropped
"""

# ARGV: prefix, default ttl ms, thread id, now ms, waiting or '', finished or ''.
_LUA_RETENTION = r"""
local p = ARGV[1]
touch_meta(p, ARGV[3], ARGV[4])
local m = p .. META
if ARGV[5] == '' then redis.call('HDEL', m, 'wm') else redis.call('HSET', m, 'wm', ARGV[5]) end
if ARGV[6] == '' then redis.call('HDEL', m, 'fm') else redis.call('HSET', m, 'fm', ARGV[6]) end
expire_all(p, ttl_for(p, ARGV[2]))
return 1
"""

# ARGV: prefix, expected version or ''. Returns {bumped 0/1, version}.
_LUA_BUMP = r"""
local m = ARGV[1] .. META
local v = redis.call('HGET', m, 'v')
if not v then return {0, 0} end
if ARGV[2] ~= '' and v ~= ARGV[2] then return {0, tonumber(v)} end
return {1, redis.call('HINCRBY', m, 'v', 1)}
"""

# ARGV: target prefix, default ttl ms, target id, now ms, owner, waiting, finished,
# namespace count K, K namespaces, then (key suffix, DUMP payload) pairs.
# Returns 0 when the target already holds checkpoints (nothing is written), else 1.
_LUA_COPY = r"""
local p = ARGV[1]
for _, ns in ipairs(redis.call('SMEMBERS', p .. NAMESPACES)) do
  if redis.call('ZCARD', p .. INDEX .. ns) > 0 then return 0 end
end
local k = tonumber(ARGV[8])
for j = 9, 8 + k do redis.call('SADD', p .. NAMESPACES, ARGV[j]) end
for j = 9 + k, #ARGV, 2 do redis.call('RESTORE', p .. ARGV[j], 0, ARGV[j + 1], 'REPLACE') end
local m = p .. META
redis.call('DEL', m)
touch_meta(p, ARGV[3], ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', m, 'o', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', m, 'wm', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', m, 'fm', ARGV[7]) end
expire_all(p, ttl_for(p, ARGV[2]))
return 1
"""


# Replace a hash field only if it still holds the bytes read (one key: cluster-safe); a
# plain EVAL, not a `Script`: it touches no thread prefix.
HASH_CAS = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""


class Script:
    def __init__(self, body: str) -> None:
        self.source = _LUA_COMMON + body
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()


PUT = Script(_LUA_PUT)
PUT_HEAD = Script(_LUA_PUT_HEAD)
PUT_WRITES = Script(_LUA_PUT_WRITES)
READ = Script(_LUA_READ)
COUNT = Script(_LUA_COUNT)
DELETE = Script(_LUA_DELETE)
DELETE_UNWRITTEN = Script(_LUA_DELETE_UNWRITTEN)
DROP = Script(_LUA_DROP)
RETENTION = Script(_LUA_RETENTION)
BUMP = Script(_LUA_BUMP)
COPY = Script(_LUA_COPY)
