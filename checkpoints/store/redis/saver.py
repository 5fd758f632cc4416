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
from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from checkpoints.codec import FaithfulJSONCodec, compress_typed, decompress_typed
from checkpoints.codec.compression import reading_checkpoint, reserve
from checkpoints.codec.encryption import Place, encryption_enabled, open_typed, seal_typed
from checkpoints.codec.failures import decode_at, decode_writes
from checkpoints.errors import StoreUnavailable
from checkpoints.flows import Emit
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import check_limit, config_keys, list_bounds
from checkpoints.store.planning.copy import CopyOutcome
from checkpoints.store.planning.metadata import metadata_matches, validate_filter
from checkpoints.store.planning.prune import prune_thread_plan
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.reads import body_shape, metadata_shape
from checkpoints.store.planning.records import (
    MISSING,
    ThreadHoldings,
    ThreadStorage,
    thread_storage,
)
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.projection import set_aside
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
    BLOBS,
    INDEX,
    META,
    NAMESPACES,
    PAGE,
    RECORDS,
    REGISTRY_KEY,
    STORED_KINDS,
    WRITE_INDEX,
    dec,
    enc,
    lw_ms,
    namespaces_key,
    now_ms,
    ns_hex,
    ns_key,
    pack,
    prune_row,
    thread_prefix,
    unpack,
)
from checkpoints.store.redis.ledger import RedisLedger
from checkpoints.store.redis.scripts import (
    COPY,
    COUNT,
    DELETE,
    DELETE_UNWRITTEN,
    DROP,
    PUT,
    PUT_WRITES,
    READ,
)
from checkpoints.store.redis.sealing import RedisReseal, rebind_redis_hash
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
    StoreRequest,
    StoreWrites,
)


class RedisSaver(RedisFormat, RedisLedger, RedisReseal, RedisDriver, StoreSaver):
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
    def _io_store_checkpoint(self, plan: PutPlan):
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
        owner = plan.owner
        now = now_ms()
        size, _ = yield Batch(
            [
                Eval(
                    PUT,
                    thread_id,
                    (
                        self._default_ttl_ms(),
                        ns_hex(ns),
                        checkpoint_id,
                        record,
                        now,
                        enc(thread_id),
                        owner,
                        *blob_args,
                    ),
                ),
                # The registry is store-wide (another slot on a cluster), so it is not part
                # of the thread's script; a lost update heals at the thread's next put.
                cmd("ZADD", REGISTRY_KEY, now, enc(thread_id)),
            ]
        )
        if self.max_checkpoints and int(size) > self.max_checkpoints:
            yield from self._io_prune_thread(thread_id, self.max_checkpoints, only_ns=ns)

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

    # -- reads ----------------------------------------------------------------------------
    def _tuple(self, thread_id: str, ns: str, found: list) -> CheckpointTuple:
        checkpoint_id = dec(found[0])
        with reading_checkpoint(thread_id, ns, checkpoint_id):
            return self._read_tuple(thread_id, ns, checkpoint_id, found)

    def _read_tuple(self, thread_id: str, ns: str, checkpoint_id: str, found: list):
        blob_fields, parent, md, body_type, body, *_ = unpack(found[1])
        blobs = [
            (blob_field, unpack(value))
            for blob_field, value in zip(unpack(blob_fields), found[2], strict=False)
            if value is not None
        ]
        blobs, unread = set_aside(blobs, lambda blob: dec(unpack(blob[0])[0]))
        pending = []
        for write_field, value in zip(found[3], found[4], strict=False):
            if value is None:
                continue
            idx = int(unpack(write_field)[2])
            task, path, channel, type_, data = unpack(value)
            pending.append((dec(path), dec(task), idx, dec(channel), type_, data))
        # Frames stating more than this checkpoint may expand to: refused before any is read.
        reserve([(body_type, body), *(typed[:2] for _, typed in blobs), *(w[4:] for w in pending)])
        at = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        checkpoint = decode_at(
            lambda: body_shape(
                self._load(body_type, body, Place.body(thread_id, ns, checkpoint_id))
            ),
            part="the body",
            **at,
        )
        values = dict(unread)
        for blob_field, typed in blobs:
            channel, version = (dec(f) for f in unpack(blob_field)[:2])
            values[channel] = decode_at(
                lambda t=typed, p=Place.blob(thread_id, ns, channel, version): self._load(*t, p),
                part=("channel", channel),
                **at,
            )
        checkpoint["channel_values"] = values
        pending.sort(key=lambda w: writes_sort_key(w[0], w[1], w[2]))
        conf = {"thread_id": thread_id, "checkpoint_ns": ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": checkpoint_id}},
            checkpoint=checkpoint,
            metadata=decode_at(lambda: metadata_shape(md), part="the metadata", **at),
            parent_config=(
                {"configurable": {**conf, "checkpoint_id": dec(parent)}} if parent else None
            ),
            pending_writes=decode_writes(
                (
                    (
                        w[1],
                        w[3],
                        lambda w=w: self._load(
                            w[4], w[5], Place.write(thread_id, ns, checkpoint_id, w[1], w[2], w[3])
                        ),
                    )
                    for w in pending
                ),
                **at,
            ),
        )

    def _get_tuple_flow(self, config):
        thread_id, ns, checkpoint_id = config_keys(config)
        (found,) = yield Batch([Eval(READ, thread_id, (ns_hex(ns), checkpoint_id or ""))])
        return self._tuple(thread_id, ns, found) if found else None

    def _list_flow(self, config, filter, before, limit):
        wanted = validate_filter(filter)
        check_limit(limit)
        if limit == 0:
            return
        thread_id, only_ns, only_id, before_id = list_bounds(config, before)
        if config is not None:
            threads = [thread_id]
        else:
            (members,) = yield Batch([cmd("ZRANGE", REGISTRY_KEY, 0, -1)])
            threads = [dec(m) for m in members]
        if only_ns is not None:
            sources = [(t, str(only_ns)) for t in threads]
        else:
            found = yield Batch([cmd("SMEMBERS", namespaces_key(t)) for t in threads])
            sources = [
                (t, dec(bytes.fromhex(dec(h))))
                for t, hexes in zip(threads, found, strict=True)
                for h in hexes
            ]
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
                    pages = yield Batch(
                        [
                            cmd(
                                "ZRANGE",
                                f"{thread_prefix(sources[k][0])}i:{ns_hex(sources[k][1])}",
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
                        buffers[k] = [dec(i) for i in ids]
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
                records = yield Batch(
                    [
                        cmd("HGET", f"{thread_prefix(sources[k][0])}c:{ns_hex(sources[k][1])}", c)
                        for k, c in picks
                    ]
                )
                picks = [
                    pick
                    for pick, rec in zip(picks, records, strict=True)
                    if rec is not None and metadata_matches(json.loads(unpack(rec)[2]), wanted)
                ]
            if remaining is not None:
                picks = picks[:remaining]
            if picks:
                found = yield Batch(
                    [Eval(READ, sources[k][0], (ns_hex(sources[k][1]), c)) for k, c in picks]
                )
                items = [
                    self._tuple(sources[k][0], sources[k][1], f)
                    for (k, _), f in zip(picks, found, strict=True)
                    if f
                ]
                if remaining is not None:
                    remaining -= len(items)
                for item in items:
                    yield Emit(item)

    # -- deletes, copies, prune -----------------------------------------------------------
    def _storage(self, thread_id: str) -> ThreadStorage:
        return self._drive(self._io_storage(thread_id))

    def _io_storage(self, thread_id: str):
        p = thread_prefix(thread_id)
        (nsets,) = yield Batch([cmd("SMEMBERS", p + NAMESPACES)])
        hexes = [dec(h) for h in nsets]
        found = yield Batch(
            [cmd("HGETALL", ns_key(p, kind, h)) for h in hexes for kind in STORED_KINDS]
        )
        bodies, values, writes = [], [], []
        for n in range(len(hexes)):
            records, blobs, pending = found[3 * n : 3 * n + 3]
            bodies += [len(unpack(rec)[4]) for rec in records.values()]
            values += [(dec(unpack(f)[0]), len(unpack(v)[1])) for f, v in blobs.items()]
            writes += [(dec(unpack(v)[2]), len(unpack(v)[4])) for v in pending.values()]
        return thread_storage(bodies, values, writes)

    def _io_count(self, thread_id: str):
        (counts,) = yield Batch([Eval(COUNT, thread_id, ())])
        return ThreadHoldings(int(counts[0]), int(counts[1]))

    def _delete_round_flow(self, thread_id: str):
        _, _, counts = yield Batch(
            [
                Eval(DELETE, thread_id, ()),
                cmd("ZREM", REGISTRY_KEY, enc(thread_id)),
                Eval(COUNT, thread_id, ()),
            ]
        )
        return ThreadHoldings(int(counts[0]), int(counts[1]))

    def _io_delete_runs(self, run_ids: list[str]):
        runs = set(run_ids)
        (members,) = yield Batch([cmd("ZRANGE", REGISTRY_KEY, 0, -1)])
        threads = [dec(m) for m in members]
        if not threads:
            return
        nsets = yield Batch([cmd("SMEMBERS", namespaces_key(t)) for t in threads])
        sources = [(t, dec(h)) for t, hexes in zip(threads, nsets, strict=True) for h in hexes]
        if not sources:
            return
        records = yield Batch([cmd("HGETALL", f"{thread_prefix(t)}c:{h}") for t, h in sources])
        drops = []
        for (t, h), recs in zip(sources, records, strict=True):
            doomed = [cid for cid, rec in recs.items() if dec(unpack(rec)[5]) in runs]
            if doomed:
                drops.append(Eval(DROP, t, (h, *doomed)))
        if drops:
            yield Batch(drops)

    def _io_copy_thread(self, src: str, dst: str):
        sp = thread_prefix(src)
        meta, nsets = yield Batch([cmd("HGETALL", sp + META), cmd("SMEMBERS", sp + NAMESPACES)])
        hexes = sorted(dec(h) for h in nsets)
        suffixes = [kind + h for h in hexes for kind in (INDEX, *STORED_KINDS, WRITE_INDEX)]
        if not suffixes:
            return CopyOutcome.NO_SOURCE
        dumps = yield Batch([cmd("DUMP", sp + s) for s in suffixes], transaction=True)
        pairs: list = []
        for suffix, payload in zip(suffixes, dumps, strict=True):
            if payload is not None:
                pairs += [suffix, payload]
        if not any(s.startswith(INDEX) for s in pairs[::2]):
            return CopyOutcome.NO_SOURCE
        now = now_ms()
        copied, _ = yield Batch(
            [
                Eval(
                    COPY,
                    dst,
                    (
                        self._default_ttl_ms(),
                        enc(dst),
                        now,
                        meta.get(b"o", b""),
                        meta.get(b"wm", b""),
                        meta.get(b"fm", b""),
                        len(hexes),
                        *hexes,
                        *pairs,
                    ),
                ),
                cmd("ZADD", REGISTRY_KEY, "NX", now, enc(dst)),
            ]
        )
        if not int(copied):
            return CopyOutcome.TARGET_HOLDS
        if encryption_enabled():
            yield from self._rebind_copy_flow(src, dst, hexes)
        return CopyOutcome.COPIED

    def _rebind_copy_flow(self, src: str, dst: str, hexes: list[str]):
        # DUMP/RESTORE copied the source's bytes, sealed for the source thread: seal them
        # again for the target (see checkpoints.store.sealing).
        dp = thread_prefix(dst)
        kinds = STORED_KINDS
        found = yield Batch([cmd("HGETALL", ns_key(dp, kind, h)) for h in hexes for kind in kinds])
        sets = []
        for n, h in enumerate(hexes):
            ns = dec(bytes.fromhex(h))
            for kind, mapping in zip(kinds, found[3 * n : 3 * n + 3], strict=True):
                changed = rebind_redis_hash(kind, mapping, src, dst, ns)
                if changed:
                    sets.append(
                        cmd("HSET", ns_key(dp, kind, h), *(x for kv in changed.items() for x in kv))
                    )
        if sets:
            yield Batch(sets, transaction=True)

    def _io_prune_thread(self, thread_id: str, keep_last: int, only_ns: str | None = None):
        p = thread_prefix(thread_id)
        if only_ns is not None:
            hexes = [ns_hex(only_ns)]
        else:
            (nsets,) = yield Batch([cmd("SMEMBERS", p + NAMESPACES)])
            hexes = [dec(h) for h in nsets]
        if not hexes:
            return 0
        found = yield Batch(
            [
                cmd(op, ns_key(p, kind, h))
                for h in hexes
                for op, kind in (("HGETALL", RECORDS), ("HKEYS", BLOBS))
            ]
        )
        by_ns = {dec(bytes.fromhex(h)): h for h in hexes}
        stored = {h: set(found[2 * n + 1]) for n, h in enumerate(hexes)}
        plans = prune_thread_plan(
            {
                ns: [prune_row(dec(cid), unpack(rec)) for cid, rec in found[2 * n].items()]
                for n, ns in enumerate(by_ns)
            },
            keep_last,
            lambda ns: lambda channel, version: pack(channel, version) in stored[by_ns[ns]],
        )
        drops = [Eval(DROP, thread_id, (by_ns[ns], *doomed)) for ns, doomed in plans.items()]
        if not drops:
            return 0
        dropped = yield Batch(drops)
        return sum(int(d) for d in dropped)

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
