"""Whole-thread operations on Redis: storage sizes, counts, deletes, copies and prunes (a
mixin of `RedisSaver`, whose driver runs these flows sync or async)."""

from __future__ import annotations

from checkpoints.codec.encryption import encryption_enabled
from checkpoints.store.planning.copy import CopyOutcome
from checkpoints.store.planning.prune import prune_thread_plan
from checkpoints.store.planning.records import (
    ThreadHoldings,
    ThreadStorage,
    thread_storage,
)
from checkpoints.store.redis.driver import Batch, Eval, cmd
from checkpoints.store.redis.keys import (
    BLOBS,
    INDEX,
    META,
    NAMESPACES,
    RECORDS,
    REGISTRY_KEY,
    STORED_KINDS,
    WRITE_INDEX,
    dec,
    enc,
    namespaces_key,
    now_ms,
    ns_hex,
    ns_key,
    pack,
    prune_row,
    thread_prefix,
    unpack,
)
from checkpoints.store.redis.scripts import (
    COPY,
    COUNT,
    DELETE,
    DROP,
)
from checkpoints.store.redis.sealing import rebind_redis_hash


class RedisThreadOps:
    """The delete, copy and prune flows (and the size reports) over a thread's keys."""

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
