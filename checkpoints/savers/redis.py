"""The Redis saver: checkpoints in plain Redis, expiring on the thread's waiting retention.

Key layout. A thread's keys share the hash tag ``{<32 hex chars of sha256(thread_id)>}``,
so any thread id (slashes, braces, unicode, 10 KB) makes a short, safe tag and all of a
thread's keys land in one Redis Cluster slot; the original id is kept in the thread's meta
hash. With ``P = cp:{tag}:`` and ``N`` the namespace as hex:

- ``P m``      hash: id, created/last-write ms, version, owner, declared retention (wm, fm)
- ``P n``      set of the thread's namespaces (as hex)
- ``P i:N``    sorted set of checkpoint ids (all scores 0: ordered by id, lexically)
- ``P c:N``    hash checkpoint id -> record (blob fields, parent, metadata, body, run id)
- ``P b:N``    hash (channel, version) -> value: an unchanged channel is never written twice
- ``P w:N``    hash (checkpoint id, task id, idx) -> pending write
- ``P x:N``    sorted set of the ``w:N`` fields, so one checkpoint's writes are a range read

Store-wide keys: ``cp:format`` (generation), ``cp:threads`` (thread registry by last write),
``cp:finished:due`` / ``cp:finished:at`` (the finished-marks ledger).

Every write is one Lua script (atomic: a reader never sees half of it) that also gives all
of the thread's keys its waiting retention as TTL, so a fixed number of keys per namespace
carries the whole thread and nothing of it outlives the rest. Reads never touch a TTL.
Strings inside keys, fields and records are length-prefixed (``<len>:<bytes>``), so no
thread id, namespace, channel or task id can be mistaken for a separator.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    writes_sort_key,
)
from redis.exceptions import NoScriptError

from checkpoints.codec import FaithfulJSONCodec, compress_typed, decompress_typed
from checkpoints.conf import setting
from checkpoints.encryption import open_typed, seal_typed
from checkpoints.errors import (
    CheckpointDeleteError,
    CheckpointStoreError,
    CheckpointStoreFormatError,
    InvalidCheckpointInput,
    StoreUnavailable,
    ThreadExists,
    ThreadVersionConflict,
)
from checkpoints.savers.base import (
    _MISSING,
    DELETE_ROUNDS,
    FORMAT_ERROR_HINT,
    FORMAT_GENERATION,
    FinishedEntry,
    StoreSaver,
    ThreadHoldings,
    ThreadRetention,
    config_keys,
    json_metadata,
    metadata_matches,
    utcnow,
    validate_filter,
)

FORMAT_KEY = "cp:format"
REGISTRY_KEY = "cp:threads"
DUE_KEY = "cp:finished:due"
MARKS_KEY = "cp:finished:at"
PAGE = 100
CHUNK = 1000

# -- Lua ----------------------------------------------------------------------------------
# Key names are built inside the scripts from the thread's prefix; KEYS[1] is always the
# thread's meta key, so the call is routed to the slot every other touched key shares.
_LUA_COMMON = r"""
local KINDS = {'i:', 'c:', 'b:', 'w:', 'x:'}
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
  local wm = redis.call('HGET', p .. 'm', 'wm')
  if wm then return tonumber(wm) * 60000 end
  return tonumber(default)
end
local function expire_all(p, ttl)
  redis.call('PEXPIRE', p .. 'm', ttl)
  redis.call('PEXPIRE', p .. 'n', ttl)
  for _, ns in ipairs(redis.call('SMEMBERS', p .. 'n')) do
    for _, kind in ipairs(KINDS) do redis.call('PEXPIRE', p .. kind .. ns, ttl) end
  end
end
local function touch_meta(p, id, now)
  local m = p .. 'm'
  redis.call('HSET', m, 'id', id)
  redis.call('HSETNX', m, 'ca', now)
  redis.call('HSETNX', m, 'lw', now)
  redis.call('HSETNX', m, 'v', 1)
end
"""

# ARGV: prefix, default ttl ms, ns, checkpoint id, record, now ms, thread id, owner,
# then (blob field, blob value) pairs. Returns how many checkpoints the namespace holds.
_LUA_PUT = r"""
local p, nh, cid = ARGV[1], ARGV[3], ARGV[4]
touch_meta(p, ARGV[7], ARGV[6])
redis.call('HSET', p .. 'm', 'lw', ARGV[6])
if ARGV[8] ~= '' then redis.call('HSETNX', p .. 'm', 'o', ARGV[8]) end
redis.call('SADD', p .. 'n', nh)
redis.call('ZADD', p .. 'i:' .. nh, 0, cid)
redis.call('HSET', p .. 'c:' .. nh, cid, ARGV[5])
for j = 9, #ARGV, 2 do redis.call('HSETNX', p .. 'b:' .. nh, ARGV[j], ARGV[j + 1]) end
expire_all(p, ttl_for(p, ARGV[2]))
return redis.call('ZCARD', p .. 'i:' .. nh)
"""

# ARGV: prefix, default ttl ms, ns, now ms, thread id, then (field, value, overwrite) triples.
_LUA_PUT_WRITES = r"""
local p, nh = ARGV[1], ARGV[3]
touch_meta(p, ARGV[5], ARGV[4])
redis.call('SADD', p .. 'n', nh)
local w, x = p .. 'w:' .. nh, p .. 'x:' .. nh
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
  local r = redis.call('ZRANGE', p .. 'i:' .. nh, '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, 1)
  if #r == 0 then return false end
  cid = r[1]
end
local rec = redis.call('HGET', p .. 'c:' .. nh, cid)
if not rec then return false end
local fields = items((item(rec, 1)))
local blobs = chunked('HMGET', p .. 'b:' .. nh, fields)
local pre = tostring(#cid) .. ':' .. cid
local wf = redis.call('ZRANGE', p .. 'x:' .. nh, '[' .. pre, '[' .. pre .. '\255', 'BYLEX')
local wv = chunked('HMGET', p .. 'w:' .. nh, wf)
return {cid, rec, blobs, wf, wv}
"""

# ARGV: prefix. Returns {checkpoints, writes} the thread holds.
_LUA_COUNT = r"""
local p = ARGV[1]
local c, w = 0, 0
for _, ns in ipairs(redis.call('SMEMBERS', p .. 'n')) do
  c = c + redis.call('ZCARD', p .. 'i:' .. ns)
  w = w + redis.call('HLEN', p .. 'w:' .. ns)
end
return {c, w}
"""

# ARGV: prefix. Drops every key of the thread.
_LUA_DELETE = r"""
local p = ARGV[1]
for _, ns in ipairs(redis.call('SMEMBERS', p .. 'n')) do
  for _, kind in ipairs(KINDS) do redis.call('DEL', p .. kind .. ns) end
end
redis.call('DEL', p .. 'n', p .. 'm')
return 1
"""

# ARGV: prefix, ns, then checkpoint ids. Drops them with their writes, then every blob no
# remaining checkpoint refers to, in one step so a concurrent put cannot lose a blob.
_LUA_DROP = r"""
local p, nh = ARGV[1], ARGV[2]
local i, c, b, w, x = p .. 'i:' .. nh, p .. 'c:' .. nh, p .. 'b:' .. nh, p .. 'w:' .. nh,
  p .. 'x:' .. nh
local dropped = 0
for j = 3, #ARGV do
  local cid = ARGV[j]
  dropped = dropped + redis.call('HDEL', c, cid)
  redis.call('ZREM', i, cid)
  local pre = tostring(#cid) .. ':' .. cid
  local wf = redis.call('ZRANGE', x, '[' .. pre, '[' .. pre .. '\255', 'BYLEX')
  chunked('HDEL', w, wf)
  chunked('ZREM', x, wf)
end
local keep = {}
for _, rec in ipairs(redis.call('HVALS', c)) do
  for _, f in ipairs(items((item(rec, 1)))) do keep[f] = true end
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
local m = p .. 'm'
if ARGV[5] == '' then redis.call('HDEL', m, 'wm') else redis.call('HSET', m, 'wm', ARGV[5]) end
if ARGV[6] == '' then redis.call('HDEL', m, 'fm') else redis.call('HSET', m, 'fm', ARGV[6]) end
expire_all(p, ttl_for(p, ARGV[2]))
return 1
"""

# ARGV: prefix, expected version or ''. Returns {bumped 0/1, version}.
_LUA_BUMP = r"""
local m = ARGV[1] .. 'm'
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
for _, ns in ipairs(redis.call('SMEMBERS', p .. 'n')) do
  if redis.call('ZCARD', p .. 'i:' .. ns) > 0 then return 0 end
end
local k = tonumber(ARGV[8])
for j = 9, 8 + k do redis.call('SADD', p .. 'n', ARGV[j]) end
for j = 9 + k, #ARGV, 2 do redis.call('RESTORE', p .. ARGV[j], 0, ARGV[j + 1], 'REPLACE') end
local m = p .. 'm'
redis.call('DEL', m)
touch_meta(p, ARGV[3], ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', m, 'o', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', m, 'wm', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', m, 'fm', ARGV[7]) end
expire_all(p, ttl_for(p, ARGV[2]))
return 1
"""


class _Script:
    def __init__(self, body: str) -> None:
        self.source = _LUA_COMMON + body
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()


PUT = _Script(_LUA_PUT)
PUT_WRITES = _Script(_LUA_PUT_WRITES)
READ = _Script(_LUA_READ)
COUNT = _Script(_LUA_COUNT)
DELETE = _Script(_LUA_DELETE)
DROP = _Script(_LUA_DROP)
RETENTION = _Script(_LUA_RETENTION)
BUMP = _Script(_LUA_BUMP)
COPY = _Script(_LUA_COPY)


# -- encoding -----------------------------------------------------------------------------
def _b(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogatepass")


def _s(value: bytes) -> str:
    return value.decode("utf-8", "surrogatepass")


def _pack(*parts: str | bytes) -> bytes:
    """Length-prefixed parts: no value can be read as a separator."""
    out = []
    for part in parts:
        data = _b(part)
        out.append(b"%d:" % len(data))
        out.append(data)
    return b"".join(out)


def _unpack(data: bytes) -> list[bytes]:
    out = []
    i, end = 0, len(data)
    while i < end:
        colon = data.index(b":", i)
        n = int(data[i:colon])
        out.append(data[colon + 1 : colon + 1 + n])
        i = colon + 1 + n
    return out


def thread_tag(thread_id: str) -> str:
    """The hash tag of a thread's keys: a digest, so any thread id makes a safe tag."""
    return hashlib.sha256(_b(thread_id)).hexdigest()[:32]


def thread_prefix(thread_id: str) -> str:
    return f"cp:{{{thread_tag(thread_id)}}}:"


def _ns_hex(ns: str) -> str:
    return _b(ns).hex()


def _now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


# -- I/O requests the flows yield --------------------------------------------------------
@dataclass
class _Cmd:
    args: tuple

    def queue(self, pipe) -> None:
        pipe.execute_command(*self.args)


@dataclass
class _Eval:
    script: _Script
    thread_id: str
    args: tuple

    def queue(self, pipe) -> None:
        prefix = thread_prefix(self.thread_id)
        pipe.execute_command("EVALSHA", self.script.sha, 1, prefix + "m", prefix, *self.args)


@dataclass
class _Batch:
    requests: list
    transaction: bool = False
    # Replies that are errors come back as exception objects instead of raising.
    errors_ok: bool = False


@dataclass
class _Emit:
    items: list = field(default_factory=list)


def cmd(*args) -> _Cmd:
    return _Cmd(args)


class RedisSaver(StoreSaver):
    """Checkpoints in Redis; a thread's keys expire on its waiting retention."""

    provider = "redis"
    supports_idle_sweep = False
    delete_stops_without_progress = True

    def __init__(
        self,
        *,
        conn_string: str | None = None,
        serde=None,
        max_checkpoints=None,
        check_format: bool = True,
    ) -> None:
        super().__init__(serde=serde or FaithfulJSONCodec(), max_checkpoints=max_checkpoints)
        self.conn_string = conn_string
        if conn_string:
            self.url = conn_string
            self.client = redis.Redis.from_url(conn_string, socket_connect_timeout=5)
        else:
            import django_redis
            from django.conf import settings

            location = settings.CACHES["default"]["LOCATION"]
            self.url = location[0] if isinstance(location, (list, tuple)) else location
            self.client = django_redis.get_redis_connection("default")
        kwargs = self.client.connection_pool.connection_kwargs
        if kwargs.get("path"):
            self.address = str(kwargs["path"])
        else:
            self.address = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        self._aclients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._durability: str | None = None
        self._ready = False
        if not check_format:
            return  # only `reset_checkpoint_store` builds a saver past the format check
        try:
            self._drive(self._ready_flow(), prepare=False)
        except StoreUnavailable:
            # Checked again at the first call, so a saver built while Redis is down still
            # refuses a store in another format once it answers.
            pass

    # -- store format and durability ------------------------------------------------------
    def _ready_flow(self):
        got = yield _Batch(
            [
                cmd("GET", FORMAT_KEY),
                cmd("CONFIG", "GET", "appendonly"),
                cmd("CONFIG", "GET", "appendfsync"),
            ],
            errors_ok=True,
        )
        recorded, appendonly, appendfsync = got
        if isinstance(recorded, Exception):
            raise self._fail(recorded) from recorded
        if recorded is None:
            if (yield from self._holds_checkpoint_keys()):
                raise CheckpointStoreFormatError(
                    f"the redis checkpoint store at {self.address} holds checkpoint keys but "
                    f"records no format generation: {FORMAT_ERROR_HINT}"
                )
            created, recorded = yield _Batch(
                [cmd("SET", FORMAT_KEY, FORMAT_GENERATION, "NX"), cmd("GET", FORMAT_KEY)]
            )
        if _s(recorded) != str(FORMAT_GENERATION):
            raise CheckpointStoreFormatError(
                f"the redis checkpoint store at {self.address} is in format generation "
                f"{_s(recorded)}, this version writes {FORMAT_GENERATION}: {FORMAT_ERROR_HINT}"
            )
        self._durability = _durability_level(appendonly, appendfsync)
        self._ready = True

    def _holds_checkpoint_keys(self):
        cursor = 0
        while True:
            cursor, keys = (yield _Batch([cmd("SCAN", cursor, "MATCH", "cp:*", "COUNT", 1000)]))[0]
            if keys:
                return True
            if int(cursor) == 0:
                return False

    def reset_store(self) -> int:
        """Delete every key of this store (``cp:*``) and record the current generation."""
        try:
            threads = self.client.zcard(REGISTRY_KEY)
            for keys in _chunks(self.client.scan_iter(match="cp:*", count=1000), 500):
                self.client.unlink(*keys)
            self.client.set(FORMAT_KEY, FORMAT_GENERATION)
        except redis.RedisError as exc:
            raise self._fail(exc) from exc
        self._ready = False
        return int(threads)

    @property
    def durability(self) -> str:
        if self._durability is None:
            self._drive(self._ready_flow(), prepare=False)
        return self._durability

    # -- running flows: one shared body of logic, a sync and an async driver --------------
    def _fail(self, exc: Exception) -> CheckpointStoreError:
        if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            # A server that comes back may have lost its data, format key included: check
            # the store again before the next write.
            self._ready = False
            return StoreUnavailable(f"Redis at {self.address} is unreachable: {exc}")
        return CheckpointStoreError(f"Redis at {self.address} refused a command: {exc}")

    def _results(self, batch: _Batch, results: list, attempt: int) -> list | None:
        if attempt == 0 and any(isinstance(r, NoScriptError) for r in results):
            return None
        if batch.errors_ok:
            return results
        for r in results:
            if isinstance(r, Exception):
                raise self._fail(r) from r
        return results

    def _execute(self, batch: _Batch) -> list:
        scripts = {r.script.sha: r.script for r in batch.requests if isinstance(r, _Eval)}
        for attempt in (0, 1):
            try:
                pipe = self.client.pipeline(transaction=batch.transaction)
                for request in batch.requests:
                    request.queue(pipe)
                results = self._results(batch, pipe.execute(raise_on_error=False), attempt)
                if results is not None:
                    return results
                # The server lost its script cache (restart, SCRIPT FLUSH): load and rerun;
                # every batch is safe to run twice.
                for script in scripts.values():
                    self.client.script_load(script.source)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                raise self._fail(exc) from exc
        raise AssertionError("unreachable")

    async def _aexecute(self, batch: _Batch) -> list:
        client = self._aclient()
        scripts = {r.script.sha: r.script for r in batch.requests if isinstance(r, _Eval)}
        for attempt in (0, 1):
            try:
                pipe = client.pipeline(transaction=batch.transaction)
                for request in batch.requests:
                    request.queue(pipe)
                results = self._results(batch, await pipe.execute(raise_on_error=False), attempt)
                if results is not None:
                    return results
                for script in scripts.values():
                    await client.script_load(script.source)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                raise self._fail(exc) from exc
        raise AssertionError("unreachable")

    def _aclient(self) -> redis.asyncio.Redis:
        # redis.asyncio connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            client = redis.asyncio.Redis.from_url(self.url, socket_connect_timeout=5)
            self._aclients[loop] = client
        return client

    def _drive(self, flow, *, prepare: bool = True):
        if prepare and not self._ready:
            self._drive(self._ready_flow(), prepare=False)
        reply = None
        try:
            while True:
                request = flow.send(reply)
                reply = self._execute(request)
        except StopIteration as stop:
            return stop.value

    async def _adrive(self, flow, *, prepare: bool = True):
        if prepare and not self._ready:
            await self._adrive(self._ready_flow(), prepare=False)
        reply = None
        try:
            while True:
                request = flow.send(reply)
                reply = await self._aexecute(request)
        except StopIteration as stop:
            return stop.value

    def _drive_iter(self, flow) -> Iterator:
        if not self._ready:
            self._drive(self._ready_flow(), prepare=False)
        reply = None
        while True:
            try:
                request = flow.send(reply)
            except StopIteration:
                return
            if isinstance(request, _Emit):
                reply = None
                yield from request.items
            else:
                reply = self._execute(request)

    async def _adrive_iter(self, flow) -> AsyncIterator:
        if not self._ready:
            await self._adrive(self._ready_flow(), prepare=False)
        reply = None
        while True:
            try:
                request = flow.send(reply)
            except StopIteration:
                return
            if isinstance(request, _Emit):
                reply = None
                for item in request.items:
                    yield item
            else:
                reply = await self._aexecute(request)

    # -- serialization --------------------------------------------------------------------
    def _dump(self, value: Any, path: str = "value") -> tuple[str, bytes]:
        if isinstance(self.serde, FaithfulJSONCodec):
            # The codec names the refused value's path, such as channel_values.messages[3].
            return seal_typed(self.serde.dumps_typed(value, path=path))
        return seal_typed(compress_typed(self._encode(value, path)))

    def _load(self, type_: bytes, data: bytes) -> Any:
        return self.serde.loads_typed(decompress_typed(open_typed((_s(type_), data))))

    def _default_ttl_ms(self) -> int:
        return int(setting("RETENTION_WAITING_MINUTES")) * 60000

    # -- writes ---------------------------------------------------------------------------
    def _put_flow(self, config, checkpoint, metadata, new_versions):
        thread_id, ns, parent_id = config_keys(config)
        if not checkpoint.get("id"):
            raise InvalidCheckpointInput("checkpoint['id'] is required", field="checkpoint.id")
        checkpoint_id = str(checkpoint["id"])
        body_type, body = self._dump(
            {k: v for k, v in checkpoint.items() if k != "channel_values"}, "checkpoint"
        )
        blob_args: list[bytes] = []
        for channel, version, value in self._blob_versions(checkpoint, new_versions):
            if value is not _MISSING:
                typed = self._dump(value, f"channel_values.{channel}")
                blob_args += [_pack(channel, version), _pack(*typed)]
        blob_fields = _pack(
            *(
                _pack(channel, str(version))
                for channel, version in (checkpoint.get("channel_versions") or {}).items()
            )
        )
        md = self._stamp(json_metadata(config, metadata))
        run_id = md.get("run_id")
        record = _pack(
            blob_fields,
            parent_id or "",
            json.dumps(md, separators=(",", ":")),
            body_type,
            body,
            "" if run_id is None else str(run_id),
        )
        owner = str((config.get("configurable") or {}).get("user_id") or "")
        now = _now_ms()
        size, _ = yield _Batch(
            [
                _Eval(
                    PUT,
                    thread_id,
                    (
                        self._default_ttl_ms(),
                        _ns_hex(ns),
                        checkpoint_id,
                        record,
                        now,
                        _b(thread_id),
                        owner,
                        *blob_args,
                    ),
                ),
                # The registry is store-wide (another slot on a cluster), so it is not part
                # of the thread's script; a lost update heals at the thread's next put.
                cmd("ZADD", REGISTRY_KEY, now, _b(thread_id)),
            ]
        )
        if self.max_checkpoints and int(size) > self.max_checkpoints:
            yield from self._prune_flow(thread_id, self.max_checkpoints, only_ns=ns)
        return self._acknowledge(thread_id, ns, checkpoint, md)

    def _put_writes_flow(self, config, writes, task_id, task_path):
        thread_id, ns, checkpoint_id = config_keys(config, need_checkpoint=True)
        args: list = []
        for idx, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, idx)
            type_, data = self._dump(value, f"writes[{idx}].{channel}")
            args += [
                _pack(checkpoint_id, str(task_id), str(idx)),
                _pack(str(task_id), task_path or "", channel, type_, data),
                "1" if idx < 0 else "0",
            ]
        if not args:
            return None
        yield _Batch(
            [
                _Eval(
                    PUT_WRITES,
                    thread_id,
                    (self._default_ttl_ms(), _ns_hex(ns), _now_ms(), _b(thread_id), *args),
                )
            ]
        )
        return None

    # -- reads ----------------------------------------------------------------------------
    def _tuple(self, thread_id: str, ns: str, found: list) -> CheckpointTuple:
        checkpoint_id = _s(found[0])
        blob_fields, parent, md, body_type, body, _run = _unpack(found[1])
        checkpoint = self._load(body_type, body)
        values = {}
        for blob_field, value in zip(_unpack(blob_fields), found[2], strict=False):
            if value is not None:
                channel = _s(_unpack(blob_field)[0])
                values[channel] = self._load(*_unpack(value))
        checkpoint["channel_values"] = values
        pending = []
        for write_field, value in zip(found[3], found[4], strict=False):
            if value is None:
                continue
            idx = int(_unpack(write_field)[2])
            task, path, channel, type_, data = _unpack(value)
            pending.append((_s(path), _s(task), idx, _s(channel), type_, data))
        pending.sort(key=lambda w: writes_sort_key(w[0], w[1], w[2]))
        conf = {"thread_id": thread_id, "checkpoint_ns": ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": checkpoint_id}},
            checkpoint=checkpoint,
            metadata=json.loads(md),
            parent_config=(
                {"configurable": {**conf, "checkpoint_id": _s(parent)}} if parent else None
            ),
            pending_writes=[(w[1], w[3], self._load(w[4], w[5])) for w in pending],
        )

    def _get_tuple_flow(self, config):
        thread_id, ns, checkpoint_id = config_keys(config)
        (found,) = yield _Batch([_Eval(READ, thread_id, (_ns_hex(ns), checkpoint_id or ""))])
        return self._tuple(thread_id, ns, found) if found else None

    def _list_flow(self, config, filter, before, limit):
        wanted = validate_filter(filter)
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidCheckpointInput(f"limit must be a whole number >= 0, got {limit!r}")
        if limit == 0:
            return
        only_id = only_ns = None
        if config is not None:
            thread_id, _, only_id = config_keys(config)
            only_ns = config["configurable"].get("checkpoint_ns")
            threads = [thread_id]
        else:
            (members,) = yield _Batch([cmd("ZRANGE", REGISTRY_KEY, 0, -1)])
            threads = [_s(m) for m in members]
        if only_ns is not None:
            sources = [(t, str(only_ns)) for t in threads]
        else:
            found = yield _Batch([cmd("SMEMBERS", thread_prefix(t) + "n") for t in threads])
            sources = [
                (t, _s(bytes.fromhex(_s(h))))
                for t, hexes in zip(threads, found, strict=True)
                for h in hexes
            ]
        before_id = None
        if before is not None:
            before_id = (before.get("configurable") or {}).get("checkpoint_id")
        upper = [f"({before_id}" if before_id else "+" for _ in sources]
        buffers: list[list[str]] = [[] for _ in sources]
        done = [False for _ in sources]
        if only_id is not None:
            buffers = [[only_id] if not before_id or only_id < before_id else [] for _ in sources]
            done = [True for _ in sources]
        remaining = limit
        while remaining is None or remaining > 0:
            picks: list[tuple[int, str]] = []
            while len(picks) < PAGE:
                refill = [k for k, buf in enumerate(buffers) if not buf and not done[k]]
                if refill:
                    pages = yield _Batch(
                        [
                            cmd(
                                "ZRANGE",
                                f"{thread_prefix(sources[k][0])}i:{_ns_hex(sources[k][1])}",
                                upper[k],
                                "-",
                                "BYLEX",
                                "REV",
                                "LIMIT",
                                0,
                                PAGE,
                            )
                            for k in refill
                        ]
                    )
                    for k, ids in zip(refill, pages, strict=True):
                        buffers[k] = [_s(i) for i in ids]
                        done[k] = len(ids) < PAGE
                        if ids:
                            upper[k] = b"(" + ids[-1]
                live = [k for k, buf in enumerate(buffers) if buf]
                if not live:
                    break
                k = max(live, key=lambda k: buffers[k][0])
                picks.append((k, buffers[k].pop(0)))
            if not picks:
                return
            if wanted:
                records = yield _Batch(
                    [
                        cmd("HGET", f"{thread_prefix(sources[k][0])}c:{_ns_hex(sources[k][1])}", c)
                        for k, c in picks
                    ]
                )
                picks = [
                    pick
                    for pick, rec in zip(picks, records, strict=True)
                    if rec is not None and metadata_matches(json.loads(_unpack(rec)[2]), wanted)
                ]
            if remaining is not None:
                picks = picks[:remaining]
            if picks:
                found = yield _Batch(
                    [_Eval(READ, sources[k][0], (_ns_hex(sources[k][1]), c)) for k, c in picks]
                )
                items = [
                    self._tuple(sources[k][0], sources[k][1], f)
                    for (k, _), f in zip(picks, found, strict=True)
                    if f
                ]
                if remaining is not None:
                    remaining -= len(items)
                yield _Emit(items)

    # -- deletes, copies, prune -----------------------------------------------------------
    def _count_flow(self, thread_id: str):
        (counts,) = yield _Batch([_Eval(COUNT, thread_id, ())])
        return ThreadHoldings(int(counts[0]), int(counts[1]))

    def _delete_round_flow(self, thread_id: str):
        _, _, counts = yield _Batch(
            [
                _Eval(DELETE, thread_id, ()),
                cmd("ZREM", REGISTRY_KEY, _b(thread_id)),
                _Eval(COUNT, thread_id, ()),
            ]
        )
        return ThreadHoldings(int(counts[0]), int(counts[1]))

    def _count(self, thread_id: str) -> ThreadHoldings:
        return self._drive(self._count_flow(thread_id))

    def _delete_thread_round(self, thread_id: str) -> ThreadHoldings:
        return self._drive(self._delete_round_flow(thread_id))

    def _delete_runs_flow(self, run_ids):
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        (members,) = yield _Batch([cmd("ZRANGE", REGISTRY_KEY, 0, -1)])
        threads = [_s(m) for m in members]
        if not threads:
            return
        nsets = yield _Batch([cmd("SMEMBERS", thread_prefix(t) + "n") for t in threads])
        sources = [(t, _s(h)) for t, hexes in zip(threads, nsets, strict=True) for h in hexes]
        if not sources:
            return
        records = yield _Batch([cmd("HGETALL", f"{thread_prefix(t)}c:{h}") for t, h in sources])
        drops = []
        for (t, h), recs in zip(sources, records, strict=True):
            doomed = [cid for cid, rec in recs.items() if _s(_unpack(rec)[5]) in runs]
            if doomed:
                drops.append(_Eval(DROP, t, (h, *doomed)))
        if drops:
            yield _Batch(drops)

    def _copy_flow(self, source_thread_id, target_thread_id):
        src, dst = str(source_thread_id), str(target_thread_id)
        sp = thread_prefix(src)
        meta, nsets = yield _Batch([cmd("HGETALL", sp + "m"), cmd("SMEMBERS", sp + "n")])
        hexes = sorted(_s(h) for h in nsets)
        suffixes = [kind + h for h in hexes for kind in ("i:", "c:", "b:", "w:", "x:")]
        if not suffixes:
            return None
        dumps = yield _Batch([cmd("DUMP", sp + s) for s in suffixes], transaction=True)
        pairs: list = []
        for suffix, payload in zip(suffixes, dumps, strict=True):
            if payload is not None:
                pairs += [suffix, payload]
        if not any(s.startswith("i:") for s in pairs[::2]):
            return None
        now = _now_ms()
        copied, _ = yield _Batch(
            [
                _Eval(
                    COPY,
                    dst,
                    (
                        self._default_ttl_ms(),
                        _b(dst),
                        now,
                        meta.get(b"o", b""),
                        meta.get(b"wm", b""),
                        meta.get(b"fm", b""),
                        len(hexes),
                        *hexes,
                        *pairs,
                    ),
                ),
                cmd("ZADD", REGISTRY_KEY, "NX", now, _b(dst)),
            ]
        )
        if not int(copied):
            raise ThreadExists(
                f"cannot copy thread {src!r} onto {dst!r}: the target already holds checkpoints"
            )
        return None

    def _prune_flow(self, thread_id: str, keep_last: int, only_ns: str | None = None):
        p = thread_prefix(thread_id)
        if only_ns is not None:
            hexes = [_ns_hex(only_ns)]
        else:
            (nsets,) = yield _Batch([cmd("SMEMBERS", p + "n")])
            hexes = [_s(h) for h in nsets]
        if not hexes:
            return 0
        found = yield _Batch(
            [
                cmd(op, f"{p}{kind}{h}")
                for h in hexes
                for op, kind in (("HGETALL", "c:"), ("HKEYS", "b:"))
            ]
        )
        drops = []
        for n, h in enumerate(hexes):
            records = {_s(cid): _unpack(rec) for cid, rec in found[2 * n].items()}
            if len(records) <= keep_last:
                continue
            stored_blobs = set(found[2 * n + 1])
            ordered = sorted(records, reverse=True)
            keep = set(ordered[:keep_last])
            for cid in list(keep):
                keep |= _delta_chain(records, stored_blobs, cid)
            doomed = [cid for cid in ordered if cid not in keep]
            if doomed:
                drops.append(_Eval(DROP, thread_id, (h, *doomed)))
        if not drops:
            return 0
        dropped = yield _Batch(drops)
        return sum(int(d) for d in dropped)

    def _prune_thread(self, thread_id: str, keep_last: int) -> int:
        return self._drive(self._prune_flow(thread_id, keep_last))

    # -- LangGraph's interface, sync ------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._drive(self._get_tuple_flow(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self._drive_iter(self._list_flow(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._drive(self._put_flow(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        return self._drive(self._put_writes_flow(config, writes, task_id, task_path))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self._drive(self._delete_runs_flow(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self._drive(self._copy_flow(source_thread_id, target_thread_id))

    # -- async twins: the same flows over redis.asyncio -----------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._adrive(self._get_tuple_flow(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._adrive_iter(self._list_flow(config, filter, before, limit)):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions) -> RunnableConfig:
        return await self._adrive(self._put_flow(config, checkpoint, metadata, new_versions))

    async def aput_writes(self, config, writes, task_id, task_path="") -> None:
        return await self._adrive(self._put_writes_flow(config, writes, task_id, task_path))

    async def adelete_for_runs(self, run_ids) -> None:
        return await self._adrive(self._delete_runs_flow(run_ids))

    async def acopy_thread(self, source_thread_id, target_thread_id) -> None:
        return await self._adrive(self._copy_flow(source_thread_id, target_thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        # The base class's repeat-until-empty rule, awaited round by round.
        thread_id = str(thread_id)
        before: ThreadHoldings | None = None
        for round_no in range(1, DELETE_ROUNDS + 1):
            left = await self._adrive(self._delete_round_flow(thread_id))
            if left.empty:
                await self._adrive(self._unmark_flow(thread_id))
                return
            if (
                round_no >= 2
                and before is not None
                and (left.checkpoints + left.writes >= before.checkpoints + before.writes)
            ):
                raise CheckpointDeleteError(
                    f"thread {thread_id!r} still holds {left} after delete round {round_no}: "
                    "a writer keeps adding to it"
                )
            before = left
        raise CheckpointDeleteError(
            f"thread {thread_id!r} still holds {left} after {DELETE_ROUNDS} delete rounds: "
            "a writer keeps adding to it"
        )

    async def aprune(self, thread_ids, *, strategy="keep_latest", keep_last=None) -> int:
        if strategy == "delete":
            if isinstance(thread_ids, str):
                thread_ids = [thread_ids]
            deleted = 0
            for thread_id in thread_ids:
                deleted += (await self._adrive(self._count_flow(str(thread_id)))).checkpoints
                await self.adelete_thread(str(thread_id))
            return deleted
        # Validation is the base class's; only keep_latest reaches the store here.
        self.prune([], strategy=strategy, keep_last=keep_last)
        if isinstance(thread_ids, str):
            thread_ids = [thread_ids]
        deleted = 0
        for thread_id in thread_ids:
            deleted += await self._adrive(self._prune_flow(str(thread_id), keep_last or 1))
        return deleted

    # -- store-wide views and ledgers -----------------------------------------------------
    def _threads_flow(self, limit: int | None):
        out: list[str] = []
        start = 0
        while limit is None or len(out) < limit:
            (members,) = yield _Batch([cmd("ZRANGE", REGISTRY_KEY, start, start + PAGE - 1, "REV")])
            if not members:
                break
            exists = yield _Batch([cmd("EXISTS", thread_prefix(_s(m)) + "m") for m in members])
            # A thread whose keys expired leaves a registry entry behind: drop it here.
            stale = [m for m, e in zip(members, exists, strict=True) if not int(e)]
            if stale:
                yield _Batch([cmd("ZREM", REGISTRY_KEY, *stale)])
            out += [_s(m) for m, e in zip(members, exists, strict=True) if int(e)]
            start += len(members) - len(stale)
            if len(members) < PAGE:
                break
        return out[:limit] if limit else out

    def threads(self, *, limit: int | None = None) -> list[str]:
        return self._drive(self._threads_flow(limit))

    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry:
        entry = FinishedEntry(str(thread_id), utcnow(), due_at, owner or "")
        record = json.dumps(
            {
                "marked_at": entry.marked_at.isoformat(),
                "due_at": due_at.isoformat(),
                "owner": entry.owner,
            }
        )
        key = _b(entry.thread_id)
        self._drive(
            _single(
                _Batch(
                    [
                        cmd("ZADD", DUE_KEY, due_at.timestamp(), key),
                        cmd("HSET", MARKS_KEY, key, record),
                    ],
                    transaction=True,
                )
            )
        )
        return entry

    def _unmark_flow(self, thread_id: str):
        key = _b(str(thread_id))
        removed, _ = yield _Batch(
            [cmd("ZREM", DUE_KEY, key), cmd("HDEL", MARKS_KEY, key)], transaction=True
        )
        return bool(int(removed))

    def unmark_finished(self, thread_id: str) -> bool:
        return self._drive(self._unmark_flow(thread_id))

    def finished_mark(self, thread_id: str) -> FinishedEntry | None:
        (record,) = self._drive(_single(_Batch([cmd("HGET", MARKS_KEY, _b(str(thread_id)))])))
        return _entry(str(thread_id), record) if record is not None else None

    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        args = ["ZRANGE", DUE_KEY, "-inf", now.timestamp(), "BYSCORE"]
        if limit:
            args += ["LIMIT", 0, limit]
        (members,) = self._drive(_single(_Batch([cmd(*args)])))
        if not members:
            return []
        (records,) = self._drive(_single(_Batch([cmd("HMGET", MARKS_KEY, *members)])))
        return [_entry(_s(m), r) for m, r in zip(members, records, strict=True) if r is not None]

    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None:
        thread_id = str(thread_id)

        def text(value):
            return "" if value is None else str(int(value))

        self._drive(
            _single(
                _Batch(
                    [
                        _Eval(
                            RETENTION,
                            thread_id,
                            (
                                self._default_ttl_ms(),
                                _b(thread_id),
                                _now_ms(),
                                text(retention.waiting_minutes),
                                text(retention.finished_minutes),
                            ),
                        )
                    ]
                )
            )
        )

    def thread_retention(self, thread_id: str) -> ThreadRetention:
        (found,) = self._drive(
            _single(_Batch([cmd("HMGET", thread_prefix(str(thread_id)) + "m", "wm", "fm")]))
        )
        return ThreadRetention(*(None if v is None else int(v) for v in found))

    def thread_version(self, thread_id: str) -> int:
        (found,) = self._drive(
            _single(_Batch([cmd("HGET", thread_prefix(str(thread_id)) + "m", "v")]))
        )
        return int(found) if found is not None else 0

    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        thread_id = str(thread_id)
        arg = "" if expected is None else str(int(expected))
        ((bumped, version),) = self._drive(_single(_Batch([_Eval(BUMP, thread_id, (arg,))])))
        if not int(bumped):
            raise ThreadVersionConflict(
                f"thread {thread_id!r} is at version {int(version)}, not {expected}: "
                "it changed since it was read"
            )
        return int(version)


def _single(batch: _Batch):
    """A flow of one batch, returning its replies."""
    return (yield batch)


def _entry(thread_id: str, record: bytes) -> FinishedEntry:
    data = json.loads(record)
    return FinishedEntry(
        thread_id,
        datetime.fromisoformat(data["marked_at"]),
        datetime.fromisoformat(data["due_at"]),
        data.get("owner") or "",
    )


def _durability_level(appendonly, appendfsync) -> str:
    """ "disk" only when every write is fsynced to the AOF before it is acknowledged."""

    def value(reply, name):
        if isinstance(reply, dict):
            got = reply.get(_b(name), reply.get(name))
        elif isinstance(reply, (list, tuple)) and len(reply) == 2:
            got = reply[1]
        else:
            return ""
        return _s(got) if isinstance(got, bytes) else str(got or "")

    if isinstance(appendonly, Exception) or isinstance(appendfsync, Exception):
        return "memory"
    aof = value(appendonly, "appendonly")
    fsync = value(appendfsync, "appendfsync")
    return "disk" if aof == "yes" and fsync == "always" else "memory"


def _delta_chain(records: dict[str, list[bytes]], stored_blobs: set, cid: str) -> set[str]:
    """Ancestors a kept checkpoint's delta channels replay from, seed included."""
    md = json.loads(records[cid][2])
    channels = set((md.get("counters_since_delta_snapshot") or {}).keys())
    chain: set[str] = set()
    current: str | None = cid
    while channels and current in records:
        blob_fields, parent = records[current][0], records[current][1]
        versions = {}
        for blob_field in _unpack(blob_fields):
            channel, _ = _unpack(blob_field)
            versions[_s(channel)] = blob_field
        channels -= {ch for ch in channels if versions.get(ch) in stored_blobs}
        chain.add(current)
        current = _s(parent) if parent else None
    return chain


def _chunks(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
