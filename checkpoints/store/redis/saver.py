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

Store-wide keys share the hash tag ``{cp}``: ``cp:{cp}:format`` (generation),
``cp:{cp}:threads`` (thread registry by last write), ``cp:{cp}:finished:due`` /
``cp:{cp}:finished:at`` (the finished-marks ledger). A sweep's lock is one key of its own.

Redis Cluster (``redis+cluster://host:port[,host:port...]``; one layout serves a single
node and a cluster). No command, script or MULTI spans two slots: a thread's script touches
only its tag's slot; a finished mark (ZADD + HSET) is one MULTI on the ``{cp}`` slot. What
joins the two, the registry entry of a thread, is kept without a cross-slot transaction,
crash-safe by order and repair: a put writes the thread's keys first, then ZADDs the
registry (a crash in between leaves the thread out of ``threads()`` until its next put; its
checkpoints are whole and readable); a delete drops the keys first, then the entry (an
entry left behind, or one whose keys expired, is dropped by ``threads()`` on read). Marks
are keyed by thread id, so a mark never needs the thread's slot. Stores of the earlier
untagged layout (``cp:format``, ``cp:threads``, ...) are renamed to it, in one MULTI, when
a saver first opens them; the format generation is unchanged. A batch that meets a
failover (connection lost, CLUSTERDOWN, TRYAGAIN) is sent again a bounded number of times,
then fails with ``StoreUnavailable``; so does one behind Redis Sentinel
(``redis+sentinel://``, see `checkpoints.store.redis.clients`).

Every write is one Lua script (atomic: a reader never sees half of it) that also gives all
of the thread's keys its waiting retention as TTL, so a fixed number of keys per namespace
carries the whole thread and nothing of it outlives the rest. Reads never touch a TTL.
Strings inside keys, fields and records are length-prefixed (``<len>:<bytes>``), so no
thread id, namespace, channel or task id can be mistaken for a separator.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints.codec import FaithfulJSONCodec, compress_typed, decompress_typed
from checkpoints.codec.encryption import Place, open_typed, seal_typed
from checkpoints.errors import StoreUnavailable, ThreadVersionConflict
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.records import (
    MISSING,
    ThreadHoldings,
)
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.redis.clients import (
    cluster_address,
    cluster_client,
    failover_retries,
    is_cluster_url,
    is_sentinel_url,
    sentinel_address,
    sentinel_client,
    single_client,
)
from checkpoints.store.redis.driver import Batch, Eval, RedisDriver, cmd
from checkpoints.store.redis.format import RedisFormat
from checkpoints.store.redis.keys import (
    INDEX,
    RECORDS,
    REGISTRY_KEY,
    dec,
    enc,
    lw_ms,
    now_ms,
    ns_hex,
    ns_key,
    pack,
    thread_prefix,
    unpack,
)
from checkpoints.store.redis.ledger import RedisLedger
from checkpoints.store.redis.reading import RedisReading
from checkpoints.store.redis.scripts import (
    DELETE_UNWRITTEN,
    PUT,
    PUT_HEAD,
    PUT_WRITES,
)
from checkpoints.store.redis.sealing import RedisReseal
from checkpoints.store.redis.thread_ops import RedisThreadOps
from checkpoints.store.requests import (
    CopyThread,
    CountThread,
    DeleteRound,
    DeleteRuns,
    DeleteUnwritten,
    DurabilityOf,
    ForgetThreads,
    PruneThread,
    StoreBatch,
    StoreCheckpoint,
    StoreHead,
    StoreRequest,
    StoreWrites,
)


class RedisSaver(
    RedisReading, RedisThreadOps, RedisFormat, RedisLedger, RedisReseal, RedisDriver, StoreSaver
):
    """Checkpoints in Redis; a thread's keys expire on its waiting retention."""

    provider = "redis"
    delete_stops_without_progress = True
    # Any worker reaches the same server, so a parked run can be resumed anywhere.
    can_park = True

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
        self.cluster = is_cluster_url(conn_string)
        sentinel = is_sentinel_url(conn_string)
        if self.cluster or sentinel:
            self.url = conn_string
            if self.cluster:
                self.client = cluster_client(conn_string)
                self.address = cluster_address(conn_string)
            else:
                self.client = sentinel_client(conn_string)
                self.address = sentinel_address(conn_string)
            self.retries = failover_retries(conn_string)
        elif conn_string:
            self.url = conn_string
            self.client = single_client(conn_string)
        else:
            import django_redis
            from django.conf import settings

            location = settings.CACHES["default"]["LOCATION"]
            self.url = location[0] if isinstance(location, (list, tuple)) else location
            self.client = django_redis.get_redis_connection("default")
        if not (self.cluster or sentinel):
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

    @classmethod
    def build(cls, *, provider: str, conn_string: str | None = None, **options) -> RedisSaver:
        """The registry's constructor: ``conn_string``, else the default cache's Redis."""
        return cls(conn_string=conn_string, **options)

    # -- storage requests: one I/O flow each, driven sync or async -------------------------
    def _io(self, request: StoreRequest):
        """The I/O flow that fulfils a storage request."""
        match request:
            case StoreCheckpoint(plan):
                return self._io_store_checkpoint(plan)
            case StoreWrites(plan):
                return self._io_store_writes(plan)
            case StoreHead(plan, expected):
                return self._io_store_head(plan, expected)
            case StoreBatch(plans, writes):
                return self._io_store_batch(plans, writes)
            case DurabilityOf(thread_id, ns, checkpoint_id):
                return self._io_durability_of(thread_id, ns, checkpoint_id)
            case DeleteRound(thread_ids):
                return self._io_delete_threads_round(thread_ids)
            case ForgetThreads(thread_ids):
                return self._io_forget_threads(thread_ids)
            case DeleteUnwritten(judged):
                return self._io_delete_unwritten(judged)
            case DeleteRuns(run_ids):
                return self._io_delete_runs(run_ids)
            case CopyThread(source, target):
                return self._io_copy_thread(source, target)
            case PruneThread(thread_id, keep_last):
                return self._io_prune_thread(thread_id, keep_last)
            case CountThread(thread_id):
                return self._io_count(thread_id)
        raise TypeError(f"the Redis saver has no storage primitive for {request!r}")

    def perform(self, request: StoreRequest) -> Any:
        return self._drive(self._io(request))

    async def aperform(self, request: StoreRequest) -> Any:
        return await self._adrive(self._io(request))

    def _io_durability_of(self, thread_id: str, ns: str, checkpoint_id: str | None):
        p, h = thread_prefix(thread_id), ns_hex(ns)
        if not checkpoint_id:
            (newest,) = yield Batch(
                [cmd("ZRANGE", ns_key(p, INDEX, h), "+", "-", "BYLEX", "REV", "LIMIT", 0, 1)]
            )
            if not newest:
                return None
            checkpoint_id = dec(newest[0])
        (record,) = yield Batch([cmd("HGET", ns_key(p, RECORDS, h), checkpoint_id)])
        if record is None:
            return None
        return json.loads(unpack(record)[6])

    def _count(self, thread_id: str) -> ThreadHoldings:
        return self._drive(self._io_count(thread_id))

    def _io_delete_threads_round(self, thread_ids: list[str]):
        left = {}
        for thread_id in thread_ids:
            held = yield from self._delete_round_flow(thread_id)
            if not held.empty:
                left[thread_id] = held
        return left

    def _io_delete_unwritten(self, judged: dict[str, datetime | None]):
        ids = list(judged)
        dropped = yield Batch(
            [Eval(DELETE_UNWRITTEN, t, ("" if w is None else lw_ms(w),)) for t, w in judged.items()]
        )
        gone = [t for t, d in zip(ids, dropped, strict=True) if int(d)]
        if gone:
            # The registry and the marks are store-wide keys (another slot on a cluster), so
            # they cannot be in the thread's script: dropped right after it.
            yield Batch([cmd("ZREM", REGISTRY_KEY, *[enc(t) for t in gone])])
            yield from self._io_forget_threads(gone)
        return {t for t, d in zip(ids, dropped, strict=True) if not int(d)}

    def _io_forget_threads(self, thread_ids: list[str]):
        for thread_id in thread_ids:
            yield from self._unmark_flow(thread_id)

    # -- serialization --------------------------------------------------------------------
    # ``at`` is where the value is stored: the sealed bytes are bound to it.
    def _dump(
        self, value: Any, at: Place, path: str = "value", plan: PutPlan | WritesPlan | None = None
    ) -> tuple[str, bytes]:
        if isinstance(self.serde, FaithfulJSONCodec):
            # The codec names the refused value's path, such as channel_values.messages[3].
            typed = self.serde.dumps_typed(value, path=path)
            self._limit(typed, path, plan)
            return seal_typed(typed, at=at)
        return seal_typed(compress_typed(self._encode(value, path, plan)), at=at)

    def _load(self, type_: bytes, data: bytes, at: Place) -> Any:
        return self.serde.loads_typed(decompress_typed(open_typed((dec(type_), data), at=at)))

    def _default_ttl_ms(self) -> int:
        # The platform's waiting horizon; the scripts put a thread's declared one over it
        # (`ttl_for`: ThreadRetention.in_force's rule, read where the write happens).
        return ThreadRetention.platform().waiting_minutes * 60000

    # -- writes ---------------------------------------------------------------------------
    def _put_args(self, plan: PutPlan) -> tuple[tuple, list[bytes]]:
        """The scripts' arguments of a put: the fixed ones (ARGV[2..8]) and the blob pairs."""
        thread_id, ns, parent_id = plan.thread_id, plan.ns, plan.parent_id
        checkpoint_id = plan.checkpoint_id
        plan.plain_bytes = 0
        body_type, body = self._dump(
            plan.body(), Place.body(thread_id, ns, checkpoint_id), "checkpoint", plan
        )
        blob_args: list[bytes] = []
        for channel, version, value in plan.blobs:
            if value is not MISSING:
                typed = self._dump(
                    value,
                    Place.blob(thread_id, ns, channel, version),
                    f"channel_values.{channel}",
                    plan,
                )
                blob_args += [pack(channel, version), pack(*typed)]
        blob_fields = pack(
            *(pack(channel, str(version)) for channel, version in plan.versions.items())
        )
        run_id = plan.run_id
        # The script cannot fail once sent, so the stamp is taken here, beside the record's
        # metadata rather than in it (record part 7).
        record = pack(
            blob_fields,
            parent_id or "",
            json.dumps(plan.metadata, separators=(",", ":")),
            body_type,
            body,
            "" if run_id is None else str(run_id),
            json.dumps(self._stamp(plan), separators=(",", ":")),
        )
        fixed = (
            self._default_ttl_ms(),
            ns_hex(ns),
            checkpoint_id,
            record,
            now_ms(),
            enc(thread_id),
            plan.owner,
        )
        return fixed, blob_args

    def _io_store_checkpoint(self, plan: PutPlan):
        fixed, blob_args = self._put_args(plan)
        thread_id, now = plan.thread_id, fixed[4]
        size, _ = yield Batch(
            [
                Eval(PUT, thread_id, (*fixed, *blob_args)),
                # The registry is store-wide (another slot on a cluster), so it is not part
                # of the thread's script; a lost update heals at the thread's next put.
                cmd("ZADD", REGISTRY_KEY, now, enc(thread_id)),
            ]
        )
        if self.max_checkpoints and int(size) > self.max_checkpoints:
            yield from self._io_prune_thread(thread_id, self.max_checkpoints, only_ns=plan.ns)

    def _io_store_head(self, plan: PutPlan, expected: int | None):
        fixed, blob_args = self._put_args(plan)
        thread_id, now = plan.thread_id, fixed[4]
        arg = "" if expected is None else str(int(expected))
        # The check, the put and the bump: one script (`scripts.PUT_HEAD`).
        ((written, size, *_),) = yield Batch([Eval(PUT_HEAD, thread_id, (*fixed, arg, *blob_args))])
        if not int(written):
            raise ThreadVersionConflict(
                f"thread {thread_id!r} is at version {int(size)}, not {expected}: "
                "it changed since it was read"
            )
        # The registry and the prune follow as a put's do, once the script wrote.
        yield Batch([cmd("ZADD", REGISTRY_KEY, now, enc(thread_id))])
        if self.max_checkpoints and int(size) > self.max_checkpoints:
            yield from self._io_prune_thread(thread_id, self.max_checkpoints, only_ns=plan.ns)

    def _io_store_batch(self, plans: list[PutPlan], writes: list[WritesPlan]):
        for plan in plans:
            yield from self._io_store_checkpoint(plan)
        for batch in writes:
            yield from self._io_store_writes(batch)

    def _io_store_writes(self, plan: WritesPlan):
        thread_id, ns = plan.thread_id, plan.ns
        args: list = []
        plan.plain_bytes = 0
        for idx, channel, value in plan.items:
            at = Place.write(thread_id, ns, plan.checkpoint_id, plan.task_id, idx, channel)
            type_, data = self._dump(value, at, f"writes[{idx}].{channel}", plan)
            args += [
                pack(plan.checkpoint_id, plan.task_id, str(idx)),
                pack(plan.task_id, plan.task_path, channel, type_, data),
                "1" if idx < 0 else "0",
            ]
        yield Batch(
            [
                Eval(
                    PUT_WRITES,
                    thread_id,
                    (self._default_ttl_ms(), ns_hex(ns), now_ms(), enc(thread_id), *args),
                )
            ]
        )
        return None

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
