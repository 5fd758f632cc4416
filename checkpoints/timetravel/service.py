"""TimeTravel: read state, walk history, roll back, fork and bulk-update over any saver.

Each operation is written once, as a flow (see :mod:`checkpoints.flows`): a
generator that yields the I/O it needs (``GetTuple``, ``Put``, ...) and is sent back the
result. ``_perform`` fulfils the requests with the saver's sync methods, ``_aperform`` with
its async twins, so ``rollback`` and ``arollback`` (and every other pair) run the same
steps in the same order. History streams: it yields ``Emit`` for each snapshot.

Everything goes through the saver's public interface (get_tuple, list, put, put_writes,
get_delta_channel_history, get_next_version, bump_thread_version), so it works the same on
every provider.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints.errors import ThreadExists
from checkpoints.flows import Emit, Flow, arun, astream, run, stream
from checkpoints.timetravel.planning import (
    bulk_plan,
    check_ids,
    fork_plan,
    history_args,
    lineage_step,
    need_bulk_head,
    need_checkpoint,
    need_thread,
    rollback_plan,
    validate_supersteps,
    writes_by_task,
)
from checkpoints.timetravel.snapshot import (
    StateSnapshot,
    build_snapshot,
    checkpoint_id_of,
    materialised,
    parent_id,
    replay_needed,
    require_reducers,
    thread_config,
)

# The name operators configure: fork-signal failures are logged here.
logger = logging.getLogger("checkpoints.timetravel")

ChannelFactory = Callable[[], Mapping[str, BaseChannel]]
T = TypeVar("T")


# -- the I/O a flow asks for ------------------------------------------------------------------
@dataclass(frozen=True)
class GetTuple:
    config: dict[str, Any]


@dataclass(frozen=True)
class GetDurability:
    config: dict[str, Any]


@dataclass(frozen=True)
class DeltaHistory:
    config: dict[str, Any]
    channels: list[str]


@dataclass(frozen=True)
class Put:
    config: dict[str, Any]
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    new_versions: dict[str, Any]


@dataclass(frozen=True)
class PutWrites:
    config: dict[str, Any]
    writes: list[tuple[str, Any]]
    task_id: str


@dataclass(frozen=True)
class BumpVersion:
    thread_id: str
    expected: int | None


@dataclass(frozen=True)
class OpenList:
    """Start a ``list``; the reply is a cursor for :class:`NextRow`."""

    config: dict[str, Any]
    options: dict[str, Any]


@dataclass(frozen=True)
class NextRow:
    """The cursor's next tuple, or None when it is done."""

    cursor: Any


@dataclass(frozen=True)
class FireForked:
    source_thread_id: str
    checkpoint_id: str
    new_thread_id: str
    snapshot: StateSnapshot


Request = (
    GetTuple
    | GetDurability
    | DeltaHistory
    | Put
    | PutWrites
    | BumpVersion
    | OpenList
    | NextRow
    | FireForked
)


class TimeTravel:
    """Navigate, roll back and fork the threads of one saver.

    ``create_channels`` returns a fresh map of channel name to LangGraph channel; it is
    needed to replay reducers (bulk updates) and to rebuild DeltaChannel values.
    ``node_subscriptions`` maps each node to the channels it triggers on and drives
    ``StateSnapshot.next``.
    """

    def __init__(
        self,
        saver,
        create_channels: ChannelFactory | None = None,
        node_subscriptions: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.saver = saver
        self.create_channels = create_channels
        self.node_subscriptions = {k: list(v) for k, v in (node_subscriptions or {}).items()}

    # -- sync API ---------------------------------------------------------------------------
    def get_state(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        """The state at ``checkpoint_id``, or at the thread's newest checkpoint."""
        return self._run(self._get_state(thread_id, checkpoint_id))

    def get_state_history(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        source: str | None = None,
        filter: dict | None = None,
    ) -> Iterator[StateSnapshot]:
        """Snapshots newest first, read lazily; ``before`` is a checkpoint id to page from.

        ``filter`` matches checkpoint metadata keys exactly, as data (``source`` joins it).
        Bad arguments and a missing thread or ``before`` raise here, before any iteration.
        """
        args = history_args(thread_id, limit, before, source, filter)
        self._run(self._load(thread_id, before))
        return self._stream(self._history(thread_id, limit, args))

    def rollback(
        self, thread_id: str, checkpoint_id: str, expected_version: int | None = None
    ) -> StateSnapshot:
        """Write a new head equal in state to ``checkpoint_id``; bump the thread version."""
        return self._run(self._rollback(thread_id, checkpoint_id, expected_version))

    def fork(
        self, source_thread_id: str, checkpoint_id: str, new_thread_id: str | None = None
    ) -> StateSnapshot:
        """Copy the state at ``checkpoint_id`` into a new thread; the source is untouched."""
        return self._run(self._fork(source_thread_id, checkpoint_id, new_thread_id))

    def bulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]]
    ) -> StateSnapshot:
        """Replay synthetic supersteps through the reducers; store one bulk_update checkpoint."""
        return self._run(self._bulk_update(thread_id, supersteps))

    def lineage(self, thread_id: str) -> list[dict[str, str]]:
        """The thread at its head, then each checkpoint it was forked from, back to the origin."""
        return self._run(self._lineage(thread_id))

    # -- async API: the same flows through the saver's async methods ----------------------------
    async def aget_state(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        return await self._arun(self._get_state(thread_id, checkpoint_id))

    async def aget_state_history(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        source: str | None = None,
        filter: dict | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of get_state_history; bad arguments raise at the first iteration."""
        args = history_args(thread_id, limit, before, source, filter)
        await self._arun(self._load(thread_id, before))
        async for snapshot in self._astream(self._history(thread_id, limit, args)):
            yield snapshot

    async def arollback(
        self, thread_id: str, checkpoint_id: str, expected_version: int | None = None
    ) -> StateSnapshot:
        return await self._arun(self._rollback(thread_id, checkpoint_id, expected_version))

    async def afork(
        self, source_thread_id: str, checkpoint_id: str, new_thread_id: str | None = None
    ) -> StateSnapshot:
        return await self._arun(self._fork(source_thread_id, checkpoint_id, new_thread_id))

    async def abulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]]
    ) -> StateSnapshot:
        return await self._arun(self._bulk_update(thread_id, supersteps))

    async def alineage(self, thread_id: str) -> list[dict[str, str]]:
        return await self._arun(self._lineage(thread_id))

    # -- flows: each operation once ------------------------------------------------------------
    def _specs(self) -> dict[str, BaseChannel]:
        return dict(self.create_channels()) if self.create_channels else {}

    def _load(self, thread_id: str, checkpoint_id: str | None) -> Flow[CheckpointTuple]:
        check_ids(thread_id, checkpoint_id)
        if checkpoint_id is None:
            return need_thread((yield GetTuple(thread_config(thread_id))), thread_id)
        found = yield GetTuple(thread_config(thread_id, checkpoint_id))
        if found is None:
            need_thread((yield GetTuple(thread_config(thread_id))), thread_id)
        return need_checkpoint(found, thread_id, checkpoint_id)

    def _rebuilt(
        self, tup: CheckpointTuple, specs: Mapping[str, BaseChannel], *, required: bool
    ) -> Flow[dict[str, Any]]:
        """The values of ``tup``'s delta-chain channels, replayed through their reducers."""
        names = replay_needed(tup, specs)
        if required:
            require_reducers(tup, names, specs)
        names = [n for n in names if n in specs]
        if not names:
            return {}
        histories = yield DeltaHistory(tup.config, names)
        return materialised(names, histories, specs)

    def _parent_seen(
        self, tup: CheckpointTuple, ahead: CheckpointTuple | None
    ) -> Flow[Mapping[str, Any] | None]:
        if isinstance(tup.metadata.get("written_by"), list):
            return None
        parent = parent_id(tup)
        if parent is None:
            return None
        if ahead is not None and checkpoint_id_of(ahead) == parent:
            return ahead.checkpoint.get("versions_seen") or {}
        found = yield GetTuple(thread_config(tup.config["configurable"]["thread_id"], parent))
        return (found.checkpoint.get("versions_seen") or {}) if found else None

    def _snapshot(
        self, tup: CheckpointTuple, ahead: CheckpointTuple | None, specs
    ) -> Flow[StateSnapshot]:
        parent_seen = yield from self._parent_seen(tup, ahead)
        rebuilt = yield from self._rebuilt(tup, specs, required=False)
        durability = yield GetDurability(tup.config)
        return build_snapshot(tup, parent_seen, rebuilt, self.node_subscriptions, durability)

    def _get_state(self, thread_id: str, checkpoint_id: str | None) -> Flow[StateSnapshot]:
        tup = yield from self._load(thread_id, checkpoint_id)
        return (yield from self._snapshot(tup, None, self._specs()))

    def _history(self, thread_id: str, limit: int | None, args: dict[str, Any]) -> Flow[None]:
        specs = self._specs()
        rows = yield OpenList(thread_config(thread_id), args)
        current = yield NextRow(rows)
        produced = 0
        while current is not None and (limit is None or produced < limit):
            ahead = yield NextRow(rows)
            yield Emit((yield from self._snapshot(current, ahead, specs)))
            produced += 1
            current = ahead

    def _copy_writes(self, stored: dict[str, Any], source: CheckpointTuple) -> Flow[None]:
        for task_id, writes in writes_by_task(source):
            yield PutWrites(stored, writes, task_id)

    def _rollback(
        self, thread_id: str, checkpoint_id: str, expected_version: int | None
    ) -> Flow[StateSnapshot]:
        check_ids(thread_id, checkpoint_id)
        head = yield from self._load(thread_id, None)
        target = yield from self._load(thread_id, checkpoint_id)
        rebuilt = yield from self._rebuilt(target, self._specs(), required=True)
        plan = rollback_plan(head, target, rebuilt, self.saver.get_next_version)
        yield BumpVersion(thread_id, expected_version)
        stored = yield Put(thread_config(thread_id, checkpoint_id), *plan)
        yield from self._copy_writes(stored, target)
        return (yield from self._get_state(thread_id, plan.checkpoint["id"]))

    def _fork(
        self, source_thread_id: str, checkpoint_id: str, new_thread_id: str | None
    ) -> Flow[StateSnapshot]:
        check_ids(source_thread_id, checkpoint_id)
        new_thread_id = str(uuid.uuid4()) if new_thread_id is None else new_thread_id
        check_ids(new_thread_id)
        target = yield from self._load(source_thread_id, checkpoint_id)
        if (yield GetTuple(thread_config(new_thread_id))) is not None:
            raise ThreadExists(
                f"cannot fork {source_thread_id!r} at {checkpoint_id!r} onto thread "
                f"{new_thread_id!r}: it already holds checkpoints",
                field="new_thread_id",
            )
        rebuilt = yield from self._rebuilt(target, self._specs(), required=True)
        plan = fork_plan(source_thread_id, target, rebuilt, self.saver.get_next_version)
        stored = yield Put(thread_config(new_thread_id), *plan)
        yield from self._copy_writes(stored, target)
        snapshot = yield from self._get_state(new_thread_id, plan.checkpoint["id"])
        yield FireForked(source_thread_id, checkpoint_id, new_thread_id, snapshot)
        return snapshot

    def _bulk_update(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]]
    ) -> Flow[StateSnapshot]:
        check_ids(thread_id)
        specs = self._specs()
        validate_supersteps(supersteps, specs)
        head = need_bulk_head((yield GetTuple(thread_config(thread_id))), thread_id)
        rebuilt = yield from self._rebuilt(head, specs, required=False)
        plan = bulk_plan(head, supersteps, specs, rebuilt, self.saver.get_next_version)
        yield Put(head.config, *plan)
        return (yield from self._get_state(thread_id, plan.checkpoint["id"]))

    def _lineage(self, thread_id: str) -> Flow[list[dict[str, str]]]:
        head = yield from self._load(thread_id, None)
        steps = [{"thread_id": thread_id, "checkpoint_id": checkpoint_id_of(head)}]
        seen = {thread_id}
        current = thread_id
        while True:
            rows = yield OpenList(
                thread_config(current), {"filter": {"source": "fork"}, "limit": 1}
            )
            step = lineage_step((yield NextRow(rows)))
            if step is None or step["thread_id"] in seen:
                return steps
            steps.append(step)
            seen.add(step["thread_id"])
            current = step["thread_id"]

    # -- I/O: the only code that differs between sync and async ------------------------------
    def _run(self, flow: Flow[T]) -> T:
        return run(flow, self._perform)

    def _stream(self, flow: Flow[None]) -> Iterator[Any]:
        return stream(flow, self._perform)

    async def _arun(self, flow: Flow[T]) -> T:
        return await arun(flow, self._aperform)

    def _astream(self, flow: Flow[None]) -> AsyncIterator[Any]:
        return astream(flow, self._aperform)

    def _perform(self, request: Request) -> Any:
        saver = self.saver
        match request:
            case GetTuple(config):
                return saver.get_tuple(config)
            case GetDurability(config):
                get = getattr(saver, "get_durability", None)
                return get(config) if get is not None else None
            case DeltaHistory(config, channels):
                return saver.get_delta_channel_history(config=config, channels=channels)
            case Put(config, checkpoint, metadata, new_versions):
                return saver.put(config, checkpoint, metadata, new_versions)
            case PutWrites(config, writes, task_id):
                return saver.put_writes(config, writes, task_id)
            case BumpVersion(thread_id, expected):
                return saver.bump_thread_version(thread_id, expected=expected)
            case OpenList(config, options):
                return iter(saver.list(config, **options))
            case NextRow(cursor):
                return next(cursor, None)
            case FireForked():
                return self._fire_forked(request)
        raise TypeError(f"time travel has no sync I/O for {request!r}")

    async def _aperform(self, request: Request) -> Any:
        saver = self.saver
        match request:
            case GetTuple(config):
                return await saver.aget_tuple(config)
            case GetDurability(config):
                aget = getattr(saver, "aget_durability", None)
                return await aget(config) if aget is not None else None
            case DeltaHistory(config, channels):
                return await saver.aget_delta_channel_history(config=config, channels=channels)
            case Put(config, checkpoint, metadata, new_versions):
                return await saver.aput(config, checkpoint, metadata, new_versions)
            case PutWrites(config, writes, task_id):
                return await saver.aput_writes(config, writes, task_id)
            case BumpVersion(thread_id, expected):
                abump = getattr(saver, "abump_thread_version", None)
                if abump is not None:
                    return await abump(thread_id, expected=expected)
                bump = sync_to_async(saver.bump_thread_version, thread_sensitive=True)
                return await bump(thread_id, expected=expected)
            case OpenList(config, options):
                return saver.alist(config, **options).__aiter__()
            case NextRow(cursor):
                return await anext(cursor, None)
            case FireForked():
                # Receivers are plain Django ones and may touch the ORM.
                return await sync_to_async(self._fire_forked, thread_sensitive=True)(request)
        raise TypeError(f"time travel has no async I/O for {request!r}")

    def _fire_forked(self, fork: FireForked) -> None:
        from checkpoints.signals import thread_forked

        results = thread_forked.send_robust(
            sender=type(self),
            saver=self.saver,
            source_thread_id=fork.source_thread_id,
            checkpoint_id=fork.checkpoint_id,
            new_thread_id=fork.new_thread_id,
            snapshot=fork.snapshot,
        )
        for receiver, outcome in results:
            if isinstance(outcome, Exception):
                logger.error(
                    "thread_forked receiver %r failed for fork of %r at %r into %r; "
                    "the fork stands",
                    receiver,
                    fork.source_thread_id,
                    fork.checkpoint_id,
                    fork.new_thread_id,
                    exc_info=outcome,
                )
