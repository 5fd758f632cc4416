"""The memory saver: one store per process, shared by every memory saver built in it.

One subject: the memory store and its saver, which reaches into the store's dicts under
the store's one lock; apart, that lock would be shared across modules.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from checkpoints.codec.compression import reading_checkpoint, reserve
from checkpoints.codec.failures import decode_at, decode_writes
from checkpoints.errors import ThreadVersionConflict
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import check_limit, config_keys, list_bounds, utcnow
from checkpoints.store.planning.copy import CopyOutcome
from checkpoints.store.planning.metadata import metadata_matches, validate_filter
from checkpoints.store.planning.prune import PruneRow, delta_channels, prune_thread_plan, root_of
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.reads import body_shape
from checkpoints.store.planning.records import (
    MISSING,
    FinishedEntry,
    ThreadHoldings,
    ThreadStorage,
    thread_storage,
)
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.projection import set_aside


@dataclass
class _Saved:
    body: tuple[str, bytes]
    metadata: dict[str, Any]
    parent_id: str | None
    run_id: str | None
    durability: dict[str, str] | None = None


@dataclass
class _ThreadRecord:
    created_at: datetime
    last_write_at: datetime
    version: int = 1
    retention: ThreadRetention = field(default_factory=ThreadRetention)
    owner: str = ""


class MemoryStore:
    """Everything the memory savers of one process hold, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.clear()

    def clear(self) -> None:
        # thread -> ns -> checkpoint_id -> saved
        self.checkpoints: dict[str, dict[str, dict[str, _Saved]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        # (thread, ns, channel, version) -> typed value, or None for "no value"
        self.blobs: dict[tuple[str, str, str, str], tuple[str, bytes] | None] = {}
        # (thread, ns, checkpoint_id) -> (task_id, idx) -> (task_id, channel, typed, task_path)
        self.writes: dict[tuple[str, str, str], dict[tuple[str, int], tuple]] = defaultdict(dict)
        self.threads: dict[str, _ThreadRecord] = {}
        self.marks: dict[str, FinishedEntry] = {}


STORE = MemoryStore()


class MemorySaver(StoreSaver):
    """Checkpoints in this process's memory; nothing survives the process."""

    provider = "memory"
    process_local = True

    def __init__(self, *, serde=None, max_checkpoints=None, store: MemoryStore | None = None):
        super().__init__(serde=serde, max_checkpoints=max_checkpoints)
        self.store = store or STORE

    @classmethod
    def build(cls, *, provider: str, conn_string: str | None = None, **options) -> MemorySaver:
        """The registry's constructor: memory has no connection and no stored format."""
        options.pop("check_format", None)
        return cls(**options)

    @property
    def durability(self) -> str:
        return "memory"

    @property
    def store_key(self) -> str:
        return f"memory:{id(self.store)}"

    # -- storage primitives ---------------------------------------------------------------
    def _store_checkpoint(self, plan: PutPlan) -> None:
        plan.plain_bytes = 0
        body = self._encode(plan.body(), "checkpoint", plan)
        thread_id, ns, encode = plan.thread_id, plan.ns, self._encode
        blobs = [
            (
                (thread_id, ns, channel, version),
                None if value is MISSING else encode(value, ("channel", channel), plan),
            )
            for channel, version, value in plan.blobs
        ]
        s = self.store
        with s.lock:
            stored = s.blobs
            for key, typed in blobs:
                if key not in stored:  # a (channel, version) keeps the bytes first stored
                    stored[key] = typed
            now = utcnow()
            s.checkpoints[thread_id][ns][plan.checkpoint_id] = _Saved(
                body, plan.metadata, plan.parent_id, plan.run_id, dict(self._stamp(plan, at=now))
            )
            record = s.threads.get(plan.thread_id)
            if record is None:
                s.threads[plan.thread_id] = _ThreadRecord(
                    created_at=now, last_write_at=now, owner=plan.owner
                )
            else:
                record.last_write_at = now
            if self.max_checkpoints:
                self._prune_locked(plan.thread_id, self.max_checkpoints, only_ns=plan.ns)

    def _store_head(self, plan: PutPlan, expected: int | None) -> None:
        # Under the store's lock (re-entrant) no other write lands between the check, the
        # put and the bump; the put refuses before it changes anything, if it refuses.
        with self.store.lock:
            if expected is not None and self.thread_version(plan.thread_id) != expected:
                self.bump_thread_version(plan.thread_id, expected=expected)  # the refusal
            self._store_checkpoint(plan)
            self.bump_thread_version(plan.thread_id, expected=expected)

    def _durability_of(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> dict[str, str] | None:
        with self.store.lock:
            by_id = self.store.checkpoints.get(thread_id, {}).get(ns)
            if not by_id:
                return None
            saved = by_id.get(checkpoint_id if checkpoint_id else max(by_id))
            return _copy_json(saved.durability) if saved is not None else None

    def _store_writes(self, plan: WritesPlan) -> None:
        plan.plain_bytes = 0
        encoded = [
            (idx, channel, self._encode(value, ("write to channel", channel), plan))
            for idx, channel, value in plan.items
        ]
        with self.store.lock:
            bucket = self.store.writes[(plan.thread_id, plan.ns, plan.checkpoint_id)]
            for idx, channel, typed in encoded:
                key = (plan.task_id, idx)
                if idx >= 0 and key in bucket:
                    continue
                bucket[key] = (plan.task_id, channel, typed, plan.task_path)
            # A write is a write: the sweep keeps a thread written after it judged it.
            now = utcnow()
            record = self.store.threads.get(plan.thread_id)
            if record is None:
                self.store.threads[plan.thread_id] = _ThreadRecord(
                    created_at=now, last_write_at=now
                )
            elif record.last_write_at < now:
                record.last_write_at = now

    # -- reads ----------------------------------------------------------------------------
    def _tuple(self, thread_id: str, ns: str, checkpoint_id: str, saved: _Saved) -> CheckpointTuple:
        with reading_checkpoint(thread_id, ns, checkpoint_id):
            return self._read_tuple(thread_id, ns, checkpoint_id, saved)

    def _read_tuple(self, thread_id: str, ns: str, checkpoint_id: str, saved: _Saved):
        at = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        checkpoint = decode_at(
            lambda: body_shape(self.serde.loads_typed(saved.body)), part="the body", **at
        )
        blobs = [
            (channel, typed)
            for channel, version in checkpoint.get("channel_versions", {}).items()
            if (typed := self.store.blobs.get((thread_id, ns, channel, str(version)))) is not None
        ]
        blobs, values = set_aside(blobs, lambda blob: blob[0])
        bucket = self.store.writes.get((thread_id, ns, checkpoint_id), {})
        # Frames stating more than this checkpoint may expand to: refused before any is read.
        reserve([*(typed for _, typed in blobs), *(w[2] for w in bucket.values())])
        loaded = self._loads_many([typed for _, typed in blobs]) if blobs else None
        if loaded is not None:
            values.update(zip((channel for channel, _ in blobs), loaded, strict=True))
        else:
            for channel, typed in blobs:
                values[channel] = decode_at(
                    lambda t=typed: self.serde.loads_typed(t), part=("channel", channel), **at
                )
        checkpoint["channel_values"] = values
        ordered = sorted(
            bucket.items(), key=lambda kv: writes_sort_key(kv[1][3], kv[0][0], kv[0][1])
        )
        loaded = self._loads_many([w[2] for _, w in ordered]) if ordered else None
        if loaded is not None:
            pending_writes = [(w[0], w[1], v) for (_, w), v in zip(ordered, loaded, strict=True)]
        else:
            pending_writes = decode_writes(
                ((w[0], w[1], lambda w=w: self.serde.loads_typed(w[2])) for _, w in ordered),
                **at,
            )
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=checkpoint,
            metadata=_copy_json(saved.metadata),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": saved.parent_id,
                    }
                }
                if saved.parent_id
                else None
            ),
            pending_writes=pending_writes,
        )

    def _loads_many(self, typed: list[tuple[str, bytes]]) -> list | None:
        """The values read in one go (the serializer's ``loads_many``); None when it has none
        or any fails, and the caller reads them one by one to name the failing one."""
        loads_many = getattr(self.serde, "loads_many", None)
        if loads_many is None:
            return None
        try:
            return loads_many(typed)
        except Exception:  # noqa: BLE001 - read again one by one, which names the failure
            return None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = config_keys(config)
        with self.store.lock:
            by_id = self.store.checkpoints.get(thread_id, {}).get(ns)
            if not by_id:
                return None
            if checkpoint_id is None:
                checkpoint_id = max(by_id)
            saved = by_id.get(checkpoint_id)
            if saved is None:
                return None
            return self._tuple(thread_id, ns, checkpoint_id, saved)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        wanted = validate_filter(filter)
        check_limit(limit)
        thread_id, only_ns, only_id, before_id = list_bounds(config, before)
        with self.store.lock:
            if config is not None:
                threads = [thread_id] if thread_id in self.store.checkpoints else []
            else:
                threads = list(self.store.checkpoints)
            keys = [
                (tid, ns, cid)
                for tid in threads
                for ns, by_id in self.store.checkpoints[tid].items()
                if only_ns is None or ns == only_ns
                for cid in by_id
                if only_id is None or cid == only_id
            ]
        keys.sort(key=lambda k: k[2], reverse=True)
        count = 0
        for tid, ns, cid in keys:
            if limit is not None and count >= limit:
                return
            if before_id and cid >= before_id:
                continue
            with self.store.lock:
                saved = self.store.checkpoints.get(tid, {}).get(ns, {}).get(cid)
                if saved is None or (wanted and not metadata_matches(saved.metadata, wanted)):
                    continue
                item = self._tuple(tid, ns, cid, saved)
            count += 1
            yield item

    # -- deletes, copies, prune -----------------------------------------------------------
    def _count(self, thread_id: str) -> ThreadHoldings:
        with self.store.lock:
            checkpoints = sum(len(v) for v in self.store.checkpoints.get(thread_id, {}).values())
            writes = sum(len(v) for k, v in self.store.writes.items() if k[0] == thread_id)
        return ThreadHoldings(checkpoints, writes)

    def _storage(self, thread_id: str) -> ThreadStorage:
        s = self.store
        with s.lock:
            spaces = s.checkpoints.get(thread_id, {})
            bodies = [len(saved.body[1]) for ns in spaces.values() for saved in ns.values()]
            values = [(k[2], len(v[1])) for k, v in s.blobs.items() if k[0] == thread_id and v]
            writes = [
                (w[1], len(w[2][1]))
                for k, by_task in s.writes.items()
                if k[0] == thread_id
                for w in by_task.values()
            ]
        return thread_storage(bodies, values, writes)

    def _delete_thread_round(self, thread_id: str) -> ThreadHoldings:
        s = self.store
        with s.lock:
            s.checkpoints.pop(thread_id, None)
            s.threads.pop(thread_id, None)
            for key in [k for k in s.writes if k[0] == thread_id]:
                del s.writes[key]
            for key in [k for k in s.blobs if k[0] == thread_id]:
                del s.blobs[key]
        return self._count(thread_id)

    def _delete_unwritten(self, judged: dict[str, datetime | None]) -> set[str]:
        s = self.store
        kept = set()
        with s.lock:
            for thread_id, judged_write in judged.items():
                record = s.threads.get(thread_id)
                if (record.last_write_at if record else None) != judged_write:
                    kept.add(thread_id)
                    continue
                self._delete_thread_round(thread_id)
                s.marks.pop(thread_id, None)
        return kept

    def _delete_runs(self, run_ids: list[str]) -> None:
        runs = set(run_ids)
        s = self.store
        with s.lock:
            for tid, by_ns in s.checkpoints.items():
                for ns, by_id in by_ns.items():
                    for cid in [c for c, saved in by_id.items() if saved.run_id in runs]:
                        del by_id[cid]
                        s.writes.pop((tid, ns, cid), None)

    def _copy_thread(self, src: str, dst: str) -> CopyOutcome:
        s = self.store
        with s.lock:
            if src not in s.checkpoints:
                return CopyOutcome.NO_SOURCE
            if any(s.checkpoints.get(dst, {}).values()):
                return CopyOutcome.TARGET_HOLDS
            for ns, by_id in s.checkpoints[src].items():
                for cid, saved in by_id.items():
                    s.checkpoints[dst][ns][cid] = _Saved(
                        saved.body,
                        _copy_json(saved.metadata),
                        saved.parent_id,
                        saved.run_id,
                        _copy_json(saved.durability),
                    )
            for (tid, ns, ch, ver), typed in list(s.blobs.items()):
                if tid == src:
                    s.blobs[(dst, ns, ch, ver)] = typed
            for (tid, ns, cid), bucket in list(s.writes.items()):
                if tid == src:
                    s.writes[(dst, ns, cid)] = dict(bucket)
            now = utcnow()
            record = s.threads.get(src)
            s.threads[dst] = _ThreadRecord(
                created_at=now,
                last_write_at=now,
                retention=record.retention if record else ThreadRetention(),
                owner=record.owner if record else "",
            )
        return CopyOutcome.COPIED

    def _prune_thread(self, thread_id: str, keep_last: int) -> int:
        with self.store.lock:
            return self._prune_locked(thread_id, keep_last)

    def _prune_locked(self, thread_id: str, keep_last: int, only_ns: str | None = None) -> int:
        s = self.store
        deleted = 0
        namespaces = {
            ns: by_id
            for ns, by_id in s.checkpoints.get(thread_id, {}).items()
            if only_ns is None or ns == only_ns
        }
        versions = {
            ns: {cid: self._versions(saved) for cid, saved in by_id.items()}
            for ns, by_id in namespaces.items()
        }
        plans = prune_thread_plan(
            {
                ns: [
                    PruneRow(
                        cid,
                        saved.parent_id,
                        delta_channels(saved.metadata),
                        versions[ns][cid],
                        root_of(saved.metadata),
                    )
                    for cid, saved in by_id.items()
                ]
                for ns, by_id in namespaces.items()
            },
            keep_last,
            lambda ns: lambda ch, ver: s.blobs.get((thread_id, ns, ch, ver)) is not None,
            lambda ns: lambda ch, ver: (thread_id, ns, ch, ver) in s.blobs,
        )
        for ns, doomed in plans.items():
            by_id = namespaces[ns]
            for cid in doomed:
                del by_id[cid]
                del versions[ns][cid]
                s.writes.pop((thread_id, ns, cid), None)
                deleted += 1
            # A kept checkpoint whose parent went has none (planning.prune_plan).
            gone = set(doomed)
            for saved in by_id.values():
                if saved.parent_id in gone:
                    saved.parent_id = None
            referenced = {
                (thread_id, ns, ch, str(ver))
                for vs in versions[ns].values()
                for ch, ver in vs.items()
            }
            for key in [
                k for k in s.blobs if k[0] == thread_id and k[1] == ns and k not in referenced
            ]:
                del s.blobs[key]
            if not by_id:
                del s.checkpoints[thread_id][ns]
        return deleted

    def _versions(self, saved: _Saved) -> dict[str, Any]:
        return self.serde.loads_typed(saved.body).get("channel_versions", {})

    def reset_store(self) -> int:
        with self.store.lock:
            count = len(self.store.checkpoints)
            self.store.clear()
        return count

    # -- store-wide views and ledgers -----------------------------------------------------
    def threads(self, *, limit: int | None = None) -> list[str]:
        with self.store.lock:
            ordered = sorted(
                (tid for tid, by_ns in self.store.checkpoints.items() if any(by_ns.values())),
                key=lambda t: (
                    self.store.threads[t].last_write_at if t in self.store.threads else utcnow()
                ),
                reverse=True,
            )
        return ordered[:limit] if limit else ordered

    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry:
        entry = FinishedEntry(str(thread_id), utcnow(), due_at, owner or "")
        with self.store.lock:
            self.store.marks[entry.thread_id] = entry
        return entry

    def unmark_finished(self, thread_id: str) -> bool:
        with self.store.lock:
            return self.store.marks.pop(str(thread_id), None) is not None

    def write_slots(self, thread_id: str) -> list[tuple]:
        with self.store.lock:
            return [
                (ns, cid, w[0], w[3], idx, w[1])
                for (t, ns, cid), bucket in self.store.writes.items()
                if t == thread_id
                for (_, idx), w in bucket.items()
            ]

    def finished_mark(self, thread_id: str) -> FinishedEntry | None:
        return self.store.marks.get(str(thread_id))

    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        with self.store.lock:
            due = sorted(
                (m for m in self.store.marks.values() if m.due_at <= now), key=lambda m: m.due_at
            )
        return due[:limit] if limit else due

    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None:
        with self.store.lock:
            record = self.store.threads.get(str(thread_id))
            if record is None:
                now = utcnow()
                record = self.store.threads[str(thread_id)] = _ThreadRecord(now, now)
            record.retention = retention

    def thread_retention(self, thread_id: str) -> ThreadRetention:
        record = self.store.threads.get(str(thread_id))
        return record.retention if record else ThreadRetention()

    def last_writes(self, thread_ids: Iterable[str]) -> dict[str, datetime]:
        with self.store.lock:
            found = {str(t): self.store.threads.get(str(t)) for t in thread_ids}
        return {t: r.last_write_at for t, r in found.items() if r is not None}

    def thread_version(self, thread_id: str) -> int:
        record = self.store.threads.get(str(thread_id))
        return record.version if record else 0

    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        with self.store.lock:
            record = self.store.threads.get(str(thread_id))
            current = record.version if record else 0
            if record is None or (expected is not None and current != expected):
                raise ThreadVersionConflict(
                    f"thread {thread_id!r} is at version {current}, not {expected}: "
                    "it changed since it was read"
                )
            record.version += 1
            return record.version

    # -- reads, async: nothing here blocks, so they call the sync methods directly --------
    async def aget_tuple(self, config):
        return self.get_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aget_delta_channel_history(self, *, config, channels):
        return self.get_delta_channel_history(config=config, channels=channels)


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value
