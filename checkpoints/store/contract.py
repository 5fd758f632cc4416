"""The store contract every saver adds to LangGraph's BaseCheckpointSaver, written once.

One subject: `StoreSaver`, one class; its flows are the rules every saver shares, and
split apart their sync and async twins would drift.

`StoreSaver` holds the one implementation of put, put_writes, delete_thread (repeat until
empty), delete_for_runs, copy_thread and prune, sync and async. Each is a *flow*: a
generator that yields typed requests (`checkpoints.store.requests`: `StoreCheckpoint`,
`StoreWrites`, `DeleteRound`, ...) and receives their results. `perform` fulfils one by
matching it to the saver's storage primitive (``_store_checkpoint``, ...); ``aperform``
awaits it (the memory saver calls the primitive directly, the ORM saver runs it off the
event loop or natively on PostgreSQL's async pool, the Redis saver drives its asyncio
I/O). So the rules are written once and the async twins cannot drift from the sync ones.

The pure rules those flows apply (keys, thread ids, prune keep-sets, delete rounds, copy
outcomes, the format verdict) live in `checkpoints.store.planning`; what a store can do
beyond LangGraph's interface is in `checkpoints.store.capabilities`.
"""

from __future__ import annotations

import copy
import logging
from abc import ABCMeta, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpoints import tracing
from checkpoints.codec.compression import plain_size, refuse_large_value
from checkpoints.codec.failures import part_text
from checkpoints.codec.serde import store_serializer as strict_serializer
from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError, InvalidArgumentType, InvalidCheckpointInput
from checkpoints.flows import arun, run
from checkpoints.signals import checkpoint_created
from checkpoints.store.capabilities import Capabilities
from checkpoints.store.planning import check_thread_id, config_keys, stored_config, utcnow
from checkpoints.store.planning.copy import CopyOutcome, copy_outcome
from checkpoints.store.planning.delete import DeleteRounds
from checkpoints.store.planning.prune import check_prune_args
from checkpoints.store.planning.put import PutPlan, plan_put
from checkpoints.store.planning.records import FinishedEntry, ThreadHoldings, ThreadStorage
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.planning.writes import WritesPlan, plan_writes
from checkpoints.store.requests import (
    CopyThread,
    CountThread,
    DeleteRound,
    DeleteRuns,
    DeleteUnwritten,
    DurabilityOf,
    ForgetThreads,
    PreparedBatch,
    PruneThread,
    StoreBatch,
    StoreCheckpoint,
    StoreHead,
    StoreRequest,
    StoreWrites,
)
from checkpoints.threads import refuse_existing
from checkpoints.versions import next_version

logger = logging.getLogger(__name__)

__all__ = ["StoreSaver", "strict_serializer"]


def _tuple_key(tup) -> tuple[str, str]:
    c = tup.config["configurable"]
    return (c.get("checkpoint_ns", ""), c["checkpoint_id"])


Flow = Generator[StoreRequest, Any, Any]


class StoreSaver(Capabilities, BaseCheckpointSaver[str], metaclass=ABCMeta):
    """The contract shared by the ORM, Redis and memory savers."""

    provider: str = ""
    # Redis stops at the first round (from the second) that makes no progress.
    delete_stops_without_progress = False

    def __init__(self, *, serde=None, max_checkpoints: int | None = None) -> None:
        super().__init__(serde=serde or strict_serializer())
        if max_checkpoints is None:
            max_checkpoints = setting("MAX_CHECKPOINTS") or 0
        if not isinstance(max_checkpoints, int) or max_checkpoints < 0:
            raise InvalidCheckpointInput(
                f"max_checkpoints must be a whole number >= 0, got {max_checkpoints!r}",
                field="max_checkpoints",
            )
        self.max_checkpoints = max_checkpoints

    def _encode(
        self, value: Any, where: str | tuple[str, str], plan: PutPlan | WritesPlan | None = None
    ) -> tuple[str, bytes]:
        """The serializer's bytes for ``value``; a refusal names where the value was.

        ``where``: the place's text, or (kind, name) made into ``kind 'name'`` only for a
        refusal (formatting it for every value cost more than some of them take to encode).
        ``plan``: the write the value belongs to, whose size limits it counts towards.
        """
        try:
            typed = self.serde.dumps_typed(value)
        except CheckpointCodecError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            where = part_text(where)
            raise CheckpointCodecError(
                f"{where} holds a {type(value).__name__} the serializer cannot store: {exc}",
                field=where,
            ) from exc
        self._limit(typed, where, plan)
        return typed

    @staticmethod
    def _limit(
        typed: tuple[str, bytes], where: Any, plan: PutPlan | WritesPlan | None = None
    ) -> None:
        """Hold an encoded value to the limits a read of it keeps (CODEC_MAX_BYTES, and
        MAX_CHECKPOINT_BYTES for the write's values together): ValueTooLarge, before any
        is stored, when it is over one."""
        if tracing.ON:  # only a span under way counts them
            tracing.count_bytes(len(typed[1]))
        size = plain_size(typed)
        refuse_large_value(size, where)
        if plan is not None:
            plan.charge(size, where)

    # -- driving flows ----------------------------------------------------------------------
    # A saver supplies the primitives below (``_store_checkpoint``, ...), or overrides
    # `perform` and `aperform` whole, as the Redis saver does with its I/O flows.
    def perform(self, request: StoreRequest) -> Any:
        """Fulfil one storage request with the saver's primitive, synchronously."""
        # The two a graph makes on every step first, without the pattern match's lookups;
        # the match below keeps every request's case (test_dialects reads the table).
        kind = type(request)
        if kind is StoreCheckpoint:
            return self._store_checkpoint(request.plan)
        if kind is StoreWrites:
            return self._store_writes(request.plan)
        match request:
            case StoreCheckpoint(plan):
                return self._store_checkpoint(plan)
            case StoreWrites(plan):
                return self._store_writes(plan)
            case StoreHead(plan, expected):
                return self._store_head(plan, expected)
            case StoreBatch(plans, writes, encoded):
                return self._store_batch(plans, writes, encoded)
            case DurabilityOf(thread_id, ns, checkpoint_id):
                return self._durability_of(thread_id, ns, checkpoint_id)
            case DeleteRound(thread_ids):
                return self._delete_threads_round(thread_ids)
            case ForgetThreads(thread_ids):
                return self._forget_threads(thread_ids)
            case DeleteUnwritten(judged):
                return self._delete_unwritten(judged)
            case DeleteRuns(run_ids):
                return self._delete_runs(run_ids)
            case CopyThread(source, target):
                return self._copy_thread(source, target)
            case PruneThread(thread_id, keep_last):
                return self._prune_thread(thread_id, keep_last)
            case CountThread(thread_id):
                return self._count(thread_id)
        raise TypeError(f"{type(self).__name__} has no storage primitive for {request!r}")

    async def aperform(self, request: StoreRequest) -> Any:
        """`perform` without blocking the event loop (the ORM and Redis savers override)."""
        return self.perform(request)

    # Every write and maintenance call of every saver passes here: the one place its span
    # opens (checkpoints.tracing; without OpenTelemetry, one None test and nothing else).
    def _run(self, flow: Flow) -> Any:
        # Asked here, not only in run_flow: the extra call cost more than some flows take.
        if tracing.tracer is not None and tracing.recording():
            return tracing.run_flow("saver", self.provider, flow, self.perform, run)
        return run(flow, self.perform)

    async def _arun(self, flow: Flow) -> Any:
        if tracing.tracer is not None and tracing.recording():
            return await tracing.arun_flow("saver", self.provider, flow, self.aperform, arun)
        return await arun(flow, self.aperform)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if tracing.tracer is not None:
            # Each saver writes its own reads; their spans are added here, once per class.
            tracing.traced_reads(cls)

    # InMemorySaver's `with saver:` / `async with saver:`; the saver owns nothing to close
    # (connections belong to Django, the pools or the Redis client), so both hand it back.
    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        return None

    def with_allowlist(self, extra_allowlist):
        """LangGraph's hook for a graph's schema types; our Redis codec takes them too."""
        widen = getattr(self.serde, "with_msgpack_allowlist", None)
        if widen is None or isinstance(self.serde, JsonPlusSerializer):
            return super().with_allowlist(extra_allowlist)
        clone = copy.copy(self)
        clone.serde = widen(extra_allowlist)
        return clone

    # -- durability -----------------------------------------------------------------------
    @property
    @abstractmethod
    def durability(self) -> str:
        """The level this store guarantees for an acknowledged write."""
        ...

    def _stamp(
        self, plan: PutPlan, level: str | None = None, at: datetime | None = None
    ) -> dict[str, str]:
        """Record on ``plan`` the durability the store is about to commit it with.

        ``level``: when the writing statement reports its own (PostgreSQL), what it is known
        as before then; the store's current level otherwise. ``at``: the time to stamp
        (now when not given).
        """
        plan.durability = {
            "level": self.durability if level is None else level,
            "at": (at or utcnow()).isoformat(),
        }
        return plan.durability

    def get_durability(self, config: RunnableConfig) -> dict[str, str] | None:
        """``{"level", "at"}`` the store recorded when it committed the checkpoint.

        The newest checkpoint of the namespace when ``config`` names none; None when there
        is no such checkpoint. Kept beside the checkpoint, so the metadata a graph wrote
        comes back exactly as written.
        """
        return self._run(self._flow_durability(config))

    async def aget_durability(self, config: RunnableConfig) -> dict[str, str] | None:
        return await self._arun(self._flow_durability(config))

    def _flow_durability(self, config: RunnableConfig) -> Flow:
        thread_id, ns, checkpoint_id = config_keys(config)
        return (yield DurabilityOf(thread_id, ns, checkpoint_id))

    def _durability_of(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> dict[str, str] | None:
        """The stamp stored beside the checkpoint (the newest when no id is given)."""
        raise NotImplementedError

    # -- versions -------------------------------------------------------------------------
    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """Zero-padded counter plus a random tail: strings that sort in write order."""
        return next_version(current)

    # -- put ------------------------------------------------------------------------------
    def _flow_put(self, config, checkpoint, metadata, new_versions) -> Flow:
        plan = plan_put(config, checkpoint, metadata, new_versions)
        # The primitive stamps the plan (`_stamp`) as it commits, and prunes the namespace
        # to max_checkpoints in the same unit of work where it can.
        yield StoreCheckpoint(plan)
        return self._acknowledge(plan)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self._flow_put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._arun(self._flow_put(config, checkpoint, metadata, new_versions))

    def _store_checkpoint(self, plan: PutPlan) -> None:
        """Write the checkpoint, its new blobs and its stamped metadata as one unit."""
        raise NotImplementedError

    # -- a rollback's put: the new head and the version bump as one unit -------------------
    def _flow_put_as_head(self, config, checkpoint, metadata, new_versions, expected) -> Flow:
        plan = plan_put(config, checkpoint, metadata, new_versions)
        yield StoreHead(plan, expected)
        return self._acknowledge(plan)

    def put_as_head(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        expected_version: int | None = None,
    ) -> RunnableConfig:
        """``put``, and bump the thread's version (its ETag), as one unit of work.

        With ``expected_version``, a thread at another version raises ThreadVersionConflict
        and nothing is written; a put the store refuses leaves the version where it was.
        No other write to the thread lands between the two (a rollback's guarantee).
        """
        flow = self._flow_put_as_head(config, checkpoint, metadata, new_versions, expected_version)
        return self._run(flow)

    async def aput_as_head(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        expected_version: int | None = None,
    ) -> RunnableConfig:
        flow = self._flow_put_as_head(config, checkpoint, metadata, new_versions, expected_version)
        return await self._arun(flow)

    def _store_head(self, plan: PutPlan, expected: int | None) -> None:
        """`_store_checkpoint` and the version bump in one unit of work (`StoreHead`)."""
        raise NotImplementedError

    def _acknowledge(self, plan: PutPlan) -> RunnableConfig:
        """The config a committed put returns; sends `checkpoint_created` with the envelope."""
        stored = stored_config(plan.thread_id, plan.ns, plan.checkpoint_id)
        # The receivers list first: asking has_listeners costs more than a put's other checks.
        if checkpoint_created.receivers and checkpoint_created.has_listeners(type(self)):
            checkpoint = plan.checkpoint
            # The store service's saver holds values as their bytes: its serializer reads
            # them for the receivers (only when there are any).
            as_received = getattr(self.serde, "as_received", None)
            if as_received is not None:
                checkpoint = as_received(checkpoint)
            checkpoint_created.send(
                sender=type(self),
                saver=self,
                thread_id=plan.thread_id,
                checkpoint_ns=plan.ns,
                checkpoint_id=plan.checkpoint_id,
                envelope={
                    "config": stored,
                    "checkpoint": checkpoint,
                    "metadata": plan.metadata,
                },
                durability=plan.durability,
            )
        return stored

    # -- put_writes -----------------------------------------------------------------------
    def _flow_put_writes(self, config, writes, task_id, task_path) -> Flow:
        plan = plan_writes(config, writes, task_id, task_path)
        if plan.items:
            yield StoreWrites(plan)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(self._flow_put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._arun(self._flow_put_writes(config, writes, task_id, task_path))

    def _store_writes(self, plan: WritesPlan) -> None:
        """Store the writes; a slot already held is kept, unless its idx is negative."""
        raise NotImplementedError

    # -- a batch of one thread's puts and writes (the import's path) ------------------------
    def _plan_many(self, puts, writes) -> tuple[list[PutPlan], list[WritesPlan]]:
        plans = [plan_put(*put) for put in puts]
        batches = [plan for plan in (plan_writes(*w) for w in writes) if plan.items]
        threads = {p.thread_id for p in plans} | {w.thread_id for w in batches}
        if len(threads) > 1:
            raise InvalidCheckpointInput(
                f"put_many writes one thread, got {len(threads)}: {sorted(threads)[:3]}",
                field="thread_id",
            )
        return plans, batches

    def _flow_put_many(self, puts, writes) -> Flow:
        plans, batches = self._plan_many(puts, writes)
        return (yield from self._flow_put_prepared(PreparedBatch(plans, batches)))

    def _flow_put_prepared(self, prepared: PreparedBatch) -> Flow:
        if prepared.plans or prepared.writes:
            yield StoreBatch(prepared.plans, prepared.writes, prepared.encoded)
        return [self._acknowledge(plan) for plan in prepared.plans]

    def put_many(
        self,
        puts: Sequence[tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]],
        writes: Sequence[tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]] = (),
    ) -> list[RunnableConfig]:
        """``put(*p)`` for each of ``puts``, then ``put_writes(*w)`` for each of ``writes``,
        all of one thread, as one unit where the store can, in as few round trips as it
        can (PostgreSQL: one statement). A write slot already held is kept. Returns each
        put's config. Used by imports, which write whole threads."""
        return self._run(self._flow_put_many(puts, writes))

    def prepare_many(self, puts, writes=()) -> PreparedBatch:
        """The part of ``put_many(puts, writes)`` that needs no connection: the checks, the
        plans and, where the store sends a batch as one statement, its encoded parameters.

        For a caller that reads ahead in another thread (an import): it prepares the next
        thread there while this one's statement runs; `put_prepared` then stores it. Raises
        `put_many`'s checks of its input, and where it encodes (PostgreSQL without
        MAX_CHECKPOINTS) the serializer's and the size limits' refusals; a store that
        encodes as it stores raises those from `put_prepared`, as `put_many` does. Encoding
        stamps the rows' times, so a batch is stored soon after it is prepared, never kept.
        """
        plans, batches = self._plan_many(puts, writes)
        return PreparedBatch(plans, batches, self._encode_batch(plans, batches))

    def put_prepared(self, prepared: PreparedBatch) -> list[RunnableConfig]:
        """`put_many` of a batch `prepare_many` made (by this saver, or a copy of it)."""
        # Its own span, named for it: where the batch was encoded ahead, that happened
        # outside any span, so the span's byte count leaves those bytes out.
        return self._run(self._flow_put_prepared(prepared))

    def _encode_batch(self, plans: list[PutPlan], writes: list[WritesPlan]) -> Any:
        """What `_store_batch` sends, made ahead (without a connection), or None: the
        store then encodes as it stores."""
        return None

    def _store_batch(
        self, plans: list[PutPlan], writes: list[WritesPlan], encoded: Any = None
    ) -> None:
        """Store the checkpoints, then the writes (savers with a bulk path override)."""
        for plan in plans:
            self._store_checkpoint(plan)
        for batch in writes:
            self._store_writes(batch)

    # -- delete that repeats until the thread is empty ------------------------------------
    def _flow_delete(self, thread_ids: Sequence[str]) -> Flow:
        rounds = DeleteRounds(thread_ids, stop_without_progress=self.delete_stops_without_progress)
        for pending in rounds:
            left = yield DeleteRound(pending)
            gone = rounds.left(left)
            if gone:
                yield ForgetThreads(gone)

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._flow_delete([thread_id]))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._flow_delete([thread_id]))

    def delete_threads(self, thread_ids: Sequence[str]) -> None:
        """Delete every thread named, repeating while writers re-add rows (`DeleteRounds`)."""
        self._run(self._flow_delete(thread_ids))

    # -- the sweep's delete: only threads still as they were judged -----------------------
    def delete_threads_unwritten(self, judged: Mapping[str, datetime | None]) -> set[str]:
        """Delete each thread whose last write is still ``judged[thread]``; return the rest.

        ``judged`` holds the last write the caller judged each thread on (`last_writes`, or
        the idle listing's), None for a thread the store had no record of. The check and
        the delete (with the thread's finished mark) are one unit on every store: one
        statement or transaction (ORM), one script per thread (Redis), the store's lock
        (memory). So a write acknowledged after the judgment is never lost: its thread is
        kept whole and returned. Not repeated: a write landing after the delete came after
        it, and survives it.
        """
        return self._run(self._flow_delete_unwritten(judged))

    def _flow_delete_unwritten(self, judged: Mapping[str, datetime | None]) -> Flow:
        judged = {check_thread_id(t): w for t, w in judged.items()}
        if not judged:
            return set()
        return set((yield DeleteUnwritten(judged)))

    def _delete_unwritten(self, judged: dict[str, datetime | None]) -> set[str]:
        """Delete, checking each against its judged last write in the same unit of work,
        the threads still at it (and their marks); return the ids kept as written since."""
        raise NotImplementedError

    def _delete_threads_round(self, thread_ids: list[str]) -> dict[str, ThreadHoldings]:
        """Delete the threads once; return what each one still holding rows holds."""
        left = {}
        for thread_id in thread_ids:
            held = self._delete_thread_round(thread_id)
            if not held.empty:
                left[thread_id] = held
        return left

    def _delete_thread_round(self, thread_id: str) -> ThreadHoldings:
        """Delete everything the thread holds once; return what is there afterwards."""
        raise NotImplementedError

    def _forget_threads(self, thread_ids: list[str]) -> None:
        """Drop the ledger entries of threads now empty."""
        for thread_id in thread_ids:
            self.unmark_finished(thread_id)

    # -- delete_for_runs ------------------------------------------------------------------
    def _flow_delete_runs(self, run_ids: Sequence[str]) -> Flow:
        runs = sorted({str(r) for r in run_ids})
        if runs:
            yield DeleteRuns(runs)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(self._flow_delete_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(self._flow_delete_runs(run_ids))

    def _delete_runs(self, run_ids: list[str]) -> None:
        """Delete the checkpoints (with their writes and orphaned blobs) of these runs."""
        raise NotImplementedError

    # -- copy -----------------------------------------------------------------------------
    def _flow_copy(self, source_thread_id: str, target_thread_id: str) -> Flow:
        src, dst = check_thread_id(source_thread_id), check_thread_id(target_thread_id)
        outcome = yield CopyThread(src, dst)
        copy_outcome(src, dst, outcome)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob and write; refuse a target that exists in any form."""
        self._refuse_existing_target(source_thread_id, target_thread_id)
        self._run(self._flow_copy(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        refuse = sync_to_async(self._refuse_existing_target, thread_sensitive=False)
        await refuse(source_thread_id, target_thread_id)
        await self._arun(self._flow_copy(source_thread_id, target_thread_id))

    def _refuse_existing_target(self, source_thread_id: str, target_thread_id: str) -> None:
        # The copy itself refuses a target holding checkpoints atomically; this also refuses
        # one known only by a mark, a retention or a thread record, so no owner is taken over.
        check_thread_id(source_thread_id)
        refuse_existing(
            saver=self,
            thread_id=check_thread_id(target_thread_id),
            doing=f"copy thread {source_thread_id!r}",
        )

    def _copy_thread(self, source: str, target: str) -> CopyOutcome:
        """Copy as one unit, unless there is no source or the target holds checkpoints."""
        raise NotImplementedError

    # -- delta-channel history --------------------------------------------------------------
    def _flow_delta_history(self, config: RunnableConfig, channels: Sequence[str]) -> Flow:
        """LangGraph's default parent-chain walk, stopping at a checkpoint seen before.

        A re-put can re-point a parent so the chain cycles; the inherited walk would then
        never return (SqliteSaver's stops too). Yields configs, is sent their tuples.
        """
        if not channels:
            return {}
        collected: dict[str, list] = {c: [] for c in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        target = yield config
        seen = {_tuple_key(target)} if target else set()
        cursor = target.parent_config if target else None
        while cursor is not None and remaining:
            tup = yield cursor
            if tup is None or _tuple_key(tup) in seen:
                break
            seen.add(_tuple_key(tup))
            for write in reversed(tup.pending_writes or ()):
                if write[1] in remaining:
                    collected[write[1]].append(write)
            for ch in list(remaining):
                if ch in tup.checkpoint["channel_values"]:
                    seeds[ch] = tup.checkpoint["channel_values"][ch]
                    remaining.discard(ch)
            cursor = tup.parent_config
        result = {}
        for ch in channels:
            result[ch] = {"writes": list(reversed(collected[ch]))}
            if ch in seeds:
                result[ch]["seed"] = seeds[ch]
        return result

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]):
        return run(self._flow_delta_history(config, channels), self.get_tuple)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]):
        return await arun(self._flow_delta_history(config, channels), self.aget_tuple)

    # -- prune ----------------------------------------------------------------------------
    def _flow_prune(self, thread_ids, strategy: str, keep_last: int | None) -> Flow:
        check_prune_args(strategy, keep_last)
        if isinstance(thread_ids, (str, bytes)):
            # "ab" is not the ids "a" and "b", nor surely the one id: refuse, as the peers do.
            raise InvalidArgumentType(
                f"thread_ids must be a list of thread ids, not a str ({thread_ids!r})",
                field="thread_ids",
            )
        deleted = 0
        for thread_id in thread_ids:
            if strategy == "delete":
                deleted += (yield CountThread(str(thread_id))).checkpoints
                yield from self._flow_delete([str(thread_id)])
            else:
                deleted += yield PruneThread(str(thread_id), keep_last or 1)
        return deleted

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> int:
        """Keep the newest checkpoints per thread and namespace; return how many went.

        ``strategy="keep_latest"`` keeps one (``keep_last`` more when given),
        ``strategy="delete"`` removes everything. Ancestors a kept checkpoint's
        DeltaChannel values are rebuilt from are kept too (`planning.prune_plan`).
        """
        return self._run(self._flow_prune(thread_ids, strategy, keep_last))

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> int:
        return await self._arun(self._flow_prune(thread_ids, strategy, keep_last))

    def _prune_thread(self, thread_id: str, keep_last: int) -> int:
        """Apply `planning.prune_plan` to each namespace of the thread; return how many went."""
        raise NotImplementedError

    @abstractmethod
    def _count(self, thread_id: str) -> ThreadHoldings: ...

    # -- reset ----------------------------------------------------------------------------
    @abstractmethod
    def reset_store(self) -> int:
        """Delete everything this store holds and record the current format generation."""
        ...

    # -- store-wide views -----------------------------------------------------------------
    @abstractmethod
    def threads(self, *, limit: int | None = None) -> list[str]:
        """Thread ids the store holds checkpoints for, newest write first."""
        ...

    def thread_holdings(self, thread_id: str) -> ThreadHoldings:
        return self._count(str(thread_id))

    def thread_storage(self, thread_id: str) -> ThreadStorage:
        """Bytes the thread's stored payloads take, by table and by channel."""
        return self._storage(str(thread_id))

    @abstractmethod
    def _storage(self, thread_id: str) -> ThreadStorage: ...

    # -- finished-marks ledger ------------------------------------------------------------
    @abstractmethod
    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry: ...

    @abstractmethod
    def unmark_finished(self, thread_id: str) -> bool: ...

    @abstractmethod
    def finished_mark(self, thread_id: str) -> FinishedEntry | None: ...

    @abstractmethod
    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        """Marks whose due time is at or before ``now``, earliest first."""
        ...

    # -- thread version (rollback bumps it; API callers send it back in If-Match) ---------
    @abstractmethod
    def thread_version(self, thread_id: str) -> int:
        """The thread's version, 0 when the store has no record of it."""
        ...

    @abstractmethod
    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        """Add one to the version; raise ThreadVersionConflict when it is not ``expected``."""
        ...

    # -- declared retention ---------------------------------------------------------------
    @abstractmethod
    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None: ...

    @abstractmethod
    def thread_retention(self, thread_id: str) -> ThreadRetention: ...
