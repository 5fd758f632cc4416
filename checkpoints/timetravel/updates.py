"""Apply updates to a thread: the one engine every entrance that changes state calls.

With the thread's graph registered (``CHECKPOINTS["GRAPHS"]``) the updates run through
LangGraph's own ``bulk_update_state``, so reducers and ``as_node`` act as in LangGraph.
Without one they are last-value writes replayed by :class:`TimeTravel`'s graph-less
fallback, which refuses a channel the thread's history shows to have a reducer. Either
way one audit event, ``bulk_update``, records the change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from langgraph.errors import InvalidUpdateError
from langgraph.types import StateUpdate

from checkpoints import audit
from checkpoints.errors import CheckpointNotFound, InvalidCheckpointInput
from checkpoints.graphs import load_graph
from checkpoints.timetravel.service import TimeTravel
from checkpoints.timetravel.snapshot import ROOT_NS, StateSnapshot, thread_config

NEEDS_GRAPH = 'register the thread\'s graph in CHECKPOINTS["GRAPHS"]'


@dataclass
class Updated:
    """What an update wrote: the new head's config; its state is read when asked for."""

    saver: Any
    config: dict[str, Any]
    graph: Any = None
    _snapshot: StateSnapshot | None = field(default=None, repr=False)

    @property
    def checkpoint_id(self) -> str:
        return self.config["configurable"]["checkpoint_id"]

    @cached_property
    def snapshot(self) -> StateSnapshot:
        if self._snapshot is not None:
            return self._snapshot
        conf = self.config["configurable"]
        travel = (
            TimeTravel.for_graph(self.saver, self.graph) if self.graph else TimeTravel(self.saver)
        )
        return travel.get_state(
            conf["thread_id"], conf["checkpoint_id"], checkpoint_ns=conf.get("checkpoint_ns") or ""
        )


def from_writes(
    supersteps: Sequence[Sequence[Mapping[str, Any]]], as_node: str | None = None
) -> list[list[StateUpdate]]:
    """Channel writes (``[[{"channel", "value"}, ...], ...]``) as updates: a superstep's
    writes are one update, unless it writes a channel twice, when each write is its own."""
    steps = []
    for step in supersteps:
        channels = [write["channel"] for write in step]
        if len(set(channels)) == len(channels):
            steps.append([StateUpdate({w["channel"]: w["value"] for w in step}, as_node)])
        else:
            steps.append([StateUpdate({w["channel"]: w["value"]}, as_node) for w in step])
    return steps


def update_state(
    saver,
    thread_id: str,
    supersteps: Sequence[Sequence[StateUpdate]],
    *,
    graph: str | None = None,
    checkpoint_id: str | None = None,
    checkpoint_ns: str = ROOT_NS,
) -> Updated:
    """Apply ``supersteps`` to the thread, through the registered graph ``graph`` (None:
    the graph-less fallback), from ``checkpoint_id`` (None: the head); audit it once."""
    config = thread_config(thread_id, checkpoint_id, checkpoint_ns)
    if checkpoint_id and saver.get_tuple(config) is None:
        raise CheckpointNotFound(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} not found",
            field="checkpoint_id",
        )
    if graph is not None:
        compiled = load_graph(graph)
        bound = compiled.copy(update={"checkpointer": saver})
        updated = Updated(saver, run_graph(bound, config, supersteps), compiled)
    else:
        updated = _fallback(saver, thread_id, supersteps, checkpoint_id, checkpoint_ns)
    audit.record(**_event(saver, thread_id, supersteps, graph, checkpoint_ns, updated))
    return updated


def _event(saver, thread_id, supersteps, graph, ns, updated: Updated) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "supersteps": len(supersteps),
        "channels": sorted(
            {
                name
                for step in supersteps
                for update in step
                if isinstance(update.values, Mapping)
                for name in update.values
            }
        ),
        "new_head": updated.checkpoint_id,
    }
    nodes = sorted({u.as_node for step in supersteps for u in step if u.as_node is not None})
    if nodes:
        detail["as_node"] = nodes
    if graph is not None:
        detail["graph"] = graph
    if ns != ROOT_NS:
        detail["checkpoint_ns"] = ns
    provider = getattr(saver, "provider", "") or ""
    return {"action": "bulk_update", "thread_id": thread_id, "provider": provider, "detail": detail}


def _fallback(saver, thread_id, supersteps, checkpoint_id, ns) -> Updated:
    """Last-value writes replayed by TimeTravel at the namespace's head."""
    if checkpoint_id:
        head = saver.get_tuple(thread_config(thread_id, None, ns))
        if head is None or head.config["configurable"]["checkpoint_id"] != checkpoint_id:
            raise InvalidCheckpointInput(
                f"checkpoint {checkpoint_id!r} is not the head of thread {thread_id!r}: an "
                f"update from an earlier checkpoint branches the thread; {NEEDS_GRAPH}",
                field="checkpoint_id",
            )
    writes = []
    for i, step in enumerate(supersteps):
        row = []
        for j, update in enumerate(step):
            if update.as_node is not None:
                raise InvalidCheckpointInput(
                    f"supersteps[{i}][{j}] names as_node {update.as_node!r}, but without the "
                    f"thread's graph no node can apply it; {NEEDS_GRAPH}",
                    field="as_node",
                )
            if not isinstance(update.values, Mapping):
                raise InvalidCheckpointInput(
                    f"supersteps[{i}][{j}] values must be an object of channel values, got "
                    f"{type(update.values).__name__}; without the thread's graph nothing "
                    f"else can be applied ({NEEDS_GRAPH})",
                    field="values",
                )
            row.extend({"channel": name, "value": value} for name, value in update.values.items())
        writes.append(row)
    travel = TimeTravel(saver, last_value_fallback=True)
    snapshot = travel.bulk_update_state(thread_id, writes, checkpoint_ns=ns)
    return Updated(saver, snapshot.config, None, snapshot)


def run_graph(graph, config: dict[str, Any], supersteps) -> dict[str, Any]:
    """LangGraph's update; its refusals (ambiguous or unknown node, no updates, a subgraph
    namespace the graph lacks, a value a channel's reducer cannot take) are the caller's
    input, never a 500."""
    try:
        return graph.bulk_update_state(config, supersteps)
    except InvalidUpdateError as exc:
        raise InvalidCheckpointInput(str(exc), field="as_node") from exc
    except ValueError as exc:
        raise InvalidCheckpointInput(f"LangGraph refused the update: {exc}") from exc
    except (TypeError, KeyError, AttributeError, IndexError) as exc:
        found = refused_channel(graph, [u.values for step in supersteps for u in step])
        if found is None:
            raise
        name, why = found
        raise InvalidCheckpointInput(
            f"channel {name!r} cannot take the value sent for it: its reducer failed with "
            f"{type(why).__name__}: {why}",
            field=f"values.{name}",
        ) from exc


def refused_channel(graph, updates: list) -> tuple[str, Exception] | None:
    """The first channel of ``graph`` whose reducer fails on the value ``updates`` send it,
    tried on an empty channel of its kind, and that failure; None when every one takes it."""
    for values in updates:
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            channel = graph.channels.get(name) if isinstance(name, str) else None
            if channel is None:
                continue
            try:
                empty = channel.from_checkpoint(channel.checkpoint())
            except Exception:  # noqa: BLE001 - a channel that cannot start empty says nothing
                continue
            try:
                empty.update([value])
            except Exception as exc:  # noqa: BLE001 - the graph's reducer, whatever it raises
                return name, exc
    return None
