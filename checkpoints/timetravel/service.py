"""TimeTravel: read state, walk history, roll back, fork and replay updates over any saver.

One subject: the time-travel operations, each written once as a flow (see
:mod:`checkpoints.flows`) and driven sync or async; what they write is decided in
``planning``, what they show in ``snapshot``, and the I/O they yield is fulfilled in ``io``.

Everything goes through the saver's public interface (get_tuple, list, put,
get_delta_channel_history, get_next_version, put_as_head), so it works the same on every
provider. Entrances apply updates through :mod:`checkpoints.timetravel.updates`,
which picks the graph or this class's graph-less replay and audits the change once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langgraph.channels.base import BaseChannel
from langgraph.channels.last_value import LastValue
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints import audit, tracing
from checkpoints.errors import InvalidCheckpointInput
from checkpoints.flows import Emit, Flow, arun, astream, run, stream
from checkpoints.timetravel.io import (
    DeltaHistory,
    FireForked,
    GetDurability,
    GetTuple,
    NextRow,
    OpenList,
    Put,
    PutAsHead,
    RefuseExisting,
    SetOwner,
    aperform,
    perform,
)
from checkpoints.timetravel.planning import (
    EVIDENCE_ROWS,
    bulk_plan,
    check_head,
    check_ids,
    expected_head_of,
    expected_version_of,
    fork_plan,
    history_args,
    last_write_per_channel,
    lineage_step,
    need_bulk_head,
    need_checkpoint,
    need_thread,
    reducer_evidence,
    refuse_strangers,
    rollback_plan,
    validate_supersteps,
)
from checkpoints.timetravel.snapshot import (
    ROOT_NS,
    StateSnapshot,
    build_snapshot,
    checkpoint_id_of,
    empty_values,
    materialised,
    parent_id,
    replay_needed,
    require_reducers,
    thread_config,
)

ChannelFactory = Callable[[], Mapping[str, BaseChannel]]
T = TypeVar("T")


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
        *,
        last_value_fallback: bool = False,
    ) -> None:
        self.saver = saver
        self.create_channels = create_channels
        self.node_subscriptions = {k: list(v) for k, v in (node_subscriptions or {}).items()}
        # Without the graph: bulk updates treat channels create_channels does not define
        # as last-value ones (the later write in a step wins), after the stored history
        # shows no reducer on them; a channel that has one is refused, never overwritten.
        self.last_value_fallback = last_value_fallback

    @classmethod
    def for_graph(cls, saver, graph) -> TimeTravel:
        """Time travel over ``saver`` that knows a compiled graph's channels and nodes.

        The graph's own channel specs give the reducers (delta chains, bulk updates) and
        its nodes' triggers drive ``next``.
        """
        channels = {
            name: spec for name, spec in graph.channels.items() if isinstance(spec, BaseChannel)
        }
        return cls(
            saver,
            create_channels=lambda: dict(channels),
            node_subscriptions={name: list(node.triggers) for name, node in graph.nodes.items()},
        )

    # -- sync API ---------------------------------------------------------------------------
    def get_state(
        self, thread_id: str, checkpoint_id: str | None = None, *, checkpoint_ns: str = ROOT_NS
    ) -> StateSnapshot:
        """The state at ``checkpoint_id``, or at the newest checkpoint of the namespace.

        ``checkpoint_ns`` addresses a subgraph's checkpoints (see :meth:`namespaces`).
        """
        return self._run(self._get_state(thread_id, checkpoint_id, checkpoint_ns))

    def get_state_history(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        source: str | None = None,
        filter: dict | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
    ) -> Iterator[StateSnapshot]:
        """Snapshots newest first, read lazily; ``before`` is a checkpoint id to page from.

        ``filter`` matches checkpoint metadata keys exactly, as data (``source`` joins it).
        Bad arguments and a missing thread or ``before`` raise here, before any iteration.
        """
        args = history_args(thread_id, limit, before, source, filter, checkpoint_ns)
        self._run(self._load(thread_id, before, checkpoint_ns))
        return self._stream(self._history(thread_id, limit, args, checkpoint_ns))

    def rollback(
        self,
        thread_id: str,
        checkpoint_id: str,
        expected_version: int | str | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
        expected_head: str | None = None,
    ) -> StateSnapshot:
        """Write a new head equal in state to ``checkpoint_id``; bump the thread version.

        In a subgraph's namespace the new head is that subgraph's: the parent's task
        resumes the subgraph from it, as after LangGraph's ``update_state`` on it.
        ``expected_version`` (the thread's version) and ``expected_head`` (the head
        checkpoint id the caller saw) refuse it with ThreadVersionConflict when the thread
        moved on; only the head shows a graph's own turn.
        """
        flow = self._rollback(
            thread_id, checkpoint_id, expected_version, checkpoint_ns, expected_head
        )
        snapshot = self._run(flow)
        audit.record(**self._rolled_back(thread_id, checkpoint_id, snapshot))
        return snapshot

    def fork(
        self,
        source_thread_id: str,
        checkpoint_id: str,
        new_thread_id: str | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
        owner: Any = None,
        expected_head: str | None = None,
    ) -> StateSnapshot:
        """Copy the state at ``checkpoint_id`` into a new thread; the source is untouched.

        A subgraph's checkpoint (``checkpoint_ns``) becomes the root of the new thread: a
        thread of the subgraph alone. The fork belongs to the user who forks it: ``owner``,
        recorded where the store records owners (None: a fork made by code, unowned),
        whoever owns the source and whatever entrance asks. ``expected_head``, the source's
        head the caller saw, refuses it with ThreadVersionConflict when the source moved on
        (what the caller was told the fork leaves behind is then no longer true).
        """
        flow = self._fork(
            source_thread_id, checkpoint_id, new_thread_id, checkpoint_ns, owner, expected_head
        )
        snapshot = self._run(flow)
        audit.record(**self._forked(source_thread_id, checkpoint_id, snapshot))
        return snapshot

    def bulk_update_state(
        self,
        thread_id: str,
        supersteps: Sequence[Sequence[Mapping[str, Any]]],
        *,
        checkpoint_ns: str = ROOT_NS,
    ) -> StateSnapshot:
        """Replay synthetic supersteps through the channels; store one bulk_update checkpoint.

        Records no audit event: entrances call :func:`checkpoints.timetravel.updates.
        update_state`, which picks the graph or this fallback and audits the change once.
        """
        return self._run(self._bulk_update(thread_id, supersteps, checkpoint_ns))

    def namespaces(self, thread_id: str) -> list[str]:
        """The thread's checkpoint namespaces: "" (the root), then each subgraph's."""
        return self._run(self._namespaces(thread_id))

    def lineage(self, thread_id: str) -> list[dict[str, str]]:
        """The thread at its head, then each checkpoint it was forked from, back to the origin."""
        return self._run(self._lineage(thread_id))

    # -- async API: the same flows through the saver's async methods ----------------------------
    async def aget_state(
        self, thread_id: str, checkpoint_id: str | None = None, *, checkpoint_ns: str = ROOT_NS
    ) -> StateSnapshot:
        return await self._arun(self._get_state(thread_id, checkpoint_id, checkpoint_ns))

    async def aget_state_history(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        source: str | None = None,
        filter: dict | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of get_state_history; bad arguments raise at the first iteration."""
        args = history_args(thread_id, limit, before, source, filter, checkpoint_ns)
        await self._arun(self._load(thread_id, before, checkpoint_ns))
        flow = self._history(thread_id, limit, args, checkpoint_ns)
        async for snapshot in self._astream(flow):
            yield snapshot

    async def arollback(
        self,
        thread_id: str,
        checkpoint_id: str,
        expected_version: int | str | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
        expected_head: str | None = None,
    ) -> StateSnapshot:
        flow = self._rollback(
            thread_id, checkpoint_id, expected_version, checkpoint_ns, expected_head
        )
        snapshot = await self._arun(flow)
        await audit.arecord(**self._rolled_back(thread_id, checkpoint_id, snapshot))
        return snapshot

    async def afork(
        self,
        source_thread_id: str,
        checkpoint_id: str,
        new_thread_id: str | None = None,
        *,
        checkpoint_ns: str = ROOT_NS,
        owner: Any = None,
        expected_head: str | None = None,
    ) -> StateSnapshot:
        flow = self._fork(
            source_thread_id, checkpoint_id, new_thread_id, checkpoint_ns, owner, expected_head
        )
        snapshot = await self._arun(flow)
        await audit.arecord(**self._forked(source_thread_id, checkpoint_id, snapshot))
        return snapshot

    async def abulk_update_state(
        self,
        thread_id: str,
        supersteps: Sequence[Sequence[Mapping[str, Any]]],
        *,
        checkpoint_ns: str = ROOT_NS,
    ) -> StateSnapshot:
        return await self._arun(self._bulk_update(thread_id, supersteps, checkpoint_ns))

    async def anamespaces(self, thread_id: str) -> list[str]:
        return await self._arun(self._namespaces(thread_id))

    async def alineage(self, thread_id: str) -> list[dict[str, str]]:
        return await self._arun(self._lineage(thread_id))

    # -- audit: what each change records ---------------------------------------------------------
    def _audit(self, action: str, thread_id: str, **detail: Any) -> dict[str, Any]:
        provider = getattr(self.saver, "provider", "") or ""
        if detail.get("checkpoint_ns") == ROOT_NS:
            del detail["checkpoint_ns"]
        return {"action": action, "thread_id": thread_id, "provider": provider, "detail": detail}

    def _rolled_back(self, thread_id: str, target: str, snapshot: StateSnapshot) -> dict:
        head = snapshot.config["configurable"]["checkpoint_id"]
        ns = snapshot.config["configurable"]["checkpoint_ns"]
        return self._audit("rollback", thread_id, target=target, new_head=head, checkpoint_ns=ns)

    def _forked(self, source: str, checkpoint_id: str, snapshot: StateSnapshot) -> dict:
        configurable = snapshot.config["configurable"]
        return self._audit(
            "fork",
            configurable["thread_id"],
            source_thread_id=source,
            source_checkpoint_id=checkpoint_id,
            new_head=configurable["checkpoint_id"],
        )

    # -- flows: each operation once ------------------------------------------------------------
    def _specs(self) -> dict[str, BaseChannel]:
        return dict(self.create_channels()) if self.create_channels else {}

    def _load(
        self, thread_id: str, checkpoint_id: str | None, ns: str = ROOT_NS
    ) -> Flow[CheckpointTuple]:
        check_ids(thread_id, checkpoint_id, ns)
        if checkpoint_id is None:
            return need_thread((yield GetTuple(thread_config(thread_id, None, ns))), thread_id, ns)
        found = yield GetTuple(thread_config(thread_id, checkpoint_id, ns))
        if found is None:
            need_thread((yield GetTuple(thread_config(thread_id, None, ns))), thread_id, ns)
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
        conf = tup.config["configurable"]
        found = yield GetTuple(thread_config(conf["thread_id"], parent, conf.get("checkpoint_ns")))
        return (found.checkpoint.get("versions_seen") or {}) if found else None

    def _snapshot(
        self, tup: CheckpointTuple, ahead: CheckpointTuple | None, specs, own_graph: bool = True
    ) -> Flow[StateSnapshot]:
        parent_seen = yield from self._parent_seen(tup, ahead)
        rebuilt = yield from self._rebuilt(tup, specs, required=False)
        nodes = self.node_subscriptions if own_graph else {}
        durability = yield GetDurability(tup.config)
        return build_snapshot(
            tup, parent_seen, rebuilt, nodes, defaults=empty_values(specs), durability=durability
        )

    def _get_state(
        self, thread_id: str, checkpoint_id: str | None, ns: str = ROOT_NS, own_graph: bool = True
    ) -> Flow[StateSnapshot]:
        tup = yield from self._load(thread_id, checkpoint_id, ns)
        return (yield from self._snapshot(tup, None, self._specs(), own_graph))

    def _history(
        self, thread_id: str, limit: int | None, args: dict[str, Any], ns: str
    ) -> Flow[None]:
        specs = self._specs()
        rows = yield OpenList(thread_config(thread_id, None, ns), args)
        current = yield NextRow(rows)
        produced = 0
        while current is not None and (limit is None or produced < limit):
            ahead = yield NextRow(rows)
            yield Emit((yield from self._snapshot(current, ahead, specs)))
            produced += 1
            current = ahead

    def _rollback(
        self,
        thread_id: str,
        checkpoint_id: str,
        expected_version: int | None,
        ns: str,
        expected_head: str | None = None,
    ) -> Flow[StateSnapshot]:
        check_ids(thread_id, checkpoint_id, ns)
        expected = expected_version_of(expected_version)
        shown_head = expected_head_of(expected_head)
        head = yield from self._load(thread_id, None, ns)
        # A turn landing between this read and the put below is not caught: the store has
        # no compare-and-set on the head, only on the version (which a turn leaves alone).
        check_head(head, shown_head, thread_id, ns)
        target = yield from self._load(thread_id, checkpoint_id, ns)
        rebuilt = yield from self._rebuilt(target, self._specs(), required=True)
        plan = rollback_plan(head, target, rebuilt, self.saver.get_next_version)
        # The target's pending writes stay behind: see planning._copy_plan.
        yield PutAsHead(expected, Put(thread_config(thread_id, checkpoint_id, ns), *plan))
        return (yield from self._get_state(thread_id, plan.checkpoint["id"], ns))

    def _fork(
        self,
        source_thread_id: str,
        checkpoint_id: str,
        new_thread_id: str | None,
        ns: str,
        owner: Any = None,
        expected_head: str | None = None,
    ) -> Flow[StateSnapshot]:
        check_ids(source_thread_id, checkpoint_id, ns)
        new_thread_id = str(uuid.uuid4()) if new_thread_id is None else new_thread_id
        check_ids(new_thread_id)
        shown_head = expected_head_of(expected_head)
        if shown_head is not None:
            check_head(
                (yield from self._load(source_thread_id, None, ns)),
                shown_head,
                source_thread_id,
                ns,
            )
        target = yield from self._load(source_thread_id, checkpoint_id, ns)
        # Any trace of the id (another namespace, a mark, a retention, a park) refuses it:
        # landing on it would take over someone's thread.
        yield RefuseExisting(new_thread_id, f"fork {source_thread_id!r} at {checkpoint_id!r}")
        rebuilt = yield from self._rebuilt(target, self._specs(), required=True)
        plan = fork_plan(source_thread_id, target, rebuilt, self.saver.get_next_version)
        yield Put(thread_config(new_thread_id), *plan)
        if owner is not None:
            yield SetOwner(new_thread_id, owner)
        # A subgraph's checkpoint is the root of the new thread, but not of our graph: its
        # tasks are read from what is stored.
        snapshot = yield from self._get_state(
            new_thread_id, plan.checkpoint["id"], own_graph=ns == ROOT_NS
        )
        yield FireForked(type(self), source_thread_id, checkpoint_id, new_thread_id, snapshot)
        return snapshot

    def _bulk_update(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]], ns: str
    ) -> Flow[StateSnapshot]:
        check_ids(thread_id, None, ns)
        specs = self._specs()
        head = None
        if self.last_value_fallback:
            validate_supersteps(supersteps, None)
            unknown = sorted({w["channel"] for step in supersteps for w in step} - set(specs))
            if unknown:
                # A thread with no checkpoint is refused as such before its channels are.
                head = need_bulk_head(
                    (yield GetTuple(thread_config(thread_id, None, ns))), thread_id
                )
                yield from self._refuse_unknown(thread_id, unknown, ns)
                specs.update({name: LastValue(object) for name in unknown})
                supersteps = [last_write_per_channel(step, set(unknown)) for step in supersteps]
        validate_supersteps(supersteps, specs)
        if head is None:
            head = need_bulk_head((yield GetTuple(thread_config(thread_id, None, ns))), thread_id)
        rebuilt = yield from self._rebuilt(head, specs, required=False)
        plan = bulk_plan(head, supersteps, specs, rebuilt, self.saver.get_next_version)
        yield Put(head.config, *plan)
        return (yield from self._get_state(thread_id, plan.checkpoint["id"], ns))

    def _refuse_unknown(self, thread_id: str, names: list[str], ns: str) -> Flow[None]:
        """Without the graph: refuse a channel the thread's newest checkpoints never held,
        and one they show to have a reducer."""
        rows = yield OpenList(thread_config(thread_id, None, ns), {"limit": EVIDENCE_ROWS})
        seen = []
        while (row := (yield NextRow(rows))) is not None:
            seen.append(row)
        refuse_strangers(thread_id, names, seen)
        evidence = reducer_evidence(seen, names)
        if evidence:
            reasons = "; ".join(f"{name!r}: {why}" for name, why in sorted(evidence.items()))
            raise InvalidCheckpointInput(
                f"refusing a bulk update of thread {thread_id!r}: channel(s) "
                f"{', '.join(repr(n) for n in sorted(evidence))} have a reducer ({reasons}), "
                "and without the graph that wrote the thread a write would overwrite the "
                'value instead of reducing it; register the graph in CHECKPOINTS["GRAPHS"]',
                field="supersteps",
            )

    def _namespaces(self, thread_id: str) -> Flow[list[str]]:
        yield from self._load(thread_id, None)
        # A config without checkpoint_ns lists every namespace of the thread.
        rows = yield OpenList({"configurable": {"thread_id": thread_id}}, {})
        found = set()
        while (row := (yield NextRow(rows))) is not None:
            found.add(row.config["configurable"].get("checkpoint_ns") or ROOT_NS)
        return sorted(found)

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
        if tracing.tracer is not None:
            provider = getattr(self.saver, "provider", "") or ""
            return tracing.run_flow("timetravel", provider, flow, self._perform, run)
        return run(flow, self._perform)

    def _stream(self, flow: Flow[None]) -> Iterator[Any]:
        return stream(flow, self._perform)

    async def _arun(self, flow: Flow[T]) -> T:
        if tracing.tracer is not None:
            provider = getattr(self.saver, "provider", "") or ""
            return await tracing.arun_flow("timetravel", provider, flow, self._aperform, arun)
        return await arun(flow, self._aperform)

    def _astream(self, flow: Flow[None]) -> AsyncIterator[Any]:
        return astream(flow, self._aperform)

    def _perform(self, request: Any) -> Any:
        return perform(self.saver, request)

    async def _aperform(self, request: Any) -> Any:
        return await aperform(self.saver, request)
