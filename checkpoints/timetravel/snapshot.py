"""What time travel shows: :class:`StateSnapshot`, built from what a saver returned.

Pure: nothing here reads or writes the store. Without the graph, ``next``, the pending
tasks and the interrupts are read from what is stored (routing channels, ``__pregel_tasks``,
pending writes), as LangGraph's ``get_state`` would list them.
"""

from __future__ import annotations

import binascii
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph._internal._typing import MISSING  # the channels' own "no value" marker
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Send
from xxhash import xxh3_128_hexdigest

from checkpoints.channels import ERROR as ERROR_CHANNEL
from checkpoints.channels import INTERRUPT as INTERRUPT_CHANNEL
from checkpoints.channels import TASKS as TASKS_CHANNEL
from checkpoints.channels import is_langgraph_channel
from checkpoints.errors import InvalidCheckpointInput

ROOT_NS = ""
SNAPSHOT_BUMPS_KEY = "__snapshot_bumps__"
PULL = "__pregel_pull"
PUSH = "__pregel_push"
START_CHANNEL = "__start__"


@dataclass
class StateSnapshot:
    """The state of a thread at one checkpoint, as time travel presents it."""

    values: dict[str, Any]
    pending_tasks: list[dict[str, Any]]
    pending_writes: list[dict[str, Any]]
    metadata: dict[str, Any]
    config: dict[str, Any]
    next: list[str]
    channel_versions: dict[str, Any] = field(default_factory=dict)
    # Pending interrupts as {"value", "id", "node"}: what a resume must answer.
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    # {"level", "at"}: what the store guaranteed when it committed this checkpoint (None
    # from a saver that keeps no stamp).
    durability: dict[str, Any] | None = None

    @property
    def thread_id(self) -> str:
        return self.config["configurable"]["thread_id"]

    @property
    def checkpoint_id(self) -> str:
        return self.config["configurable"]["checkpoint_id"]

    def as_dict(self) -> dict[str, Any]:
        """A deep copy as plain dicts and lists, the shape the API serialises."""
        return copy.deepcopy(
            {
                "values": self.values,
                "pending_tasks": self.pending_tasks,
                "pending_writes": self.pending_writes,
                "metadata": self.metadata,
                "config": self.config,
                "next": self.next,
                "channel_versions": self.channel_versions,
                "interrupts": self.interrupts,
                "durability": self.durability,
            }
        )


def thread_config(
    thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str | None = ROOT_NS
) -> dict[str, Any]:
    """The saver config addressing a thread's namespace (the root by default), or one of
    its checkpoints."""
    conf: dict[str, Any] = {"thread_id": str(thread_id), "checkpoint_ns": checkpoint_ns or ROOT_NS}
    if checkpoint_id:
        conf["checkpoint_id"] = str(checkpoint_id)
    return {"configurable": conf}


def checkpoint_id_of(tup: CheckpointTuple) -> str:
    return tup.config["configurable"]["checkpoint_id"]


def parent_id(tup: CheckpointTuple) -> str | None:
    if not tup.parent_config:
        return None
    return (tup.parent_config.get("configurable") or {}).get("checkpoint_id")


def seen_nodes(versions_seen: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in versions_seen.items() if k != SNAPSHOT_BUMPS_KEY}


# -- channels kept as delta chains: which need rebuilding, and rebuilding them --------------
def replay_needed(tup: CheckpointTuple, specs: Mapping[str, BaseChannel]) -> list[str]:
    """Channels with a version but no stored value that a reducer rebuilds (delta chains)."""
    checkpoint = tup.checkpoint
    values = checkpoint.get("channel_values") or {}
    counters = tup.metadata.get("counters_since_delta_snapshot") or {}
    return sorted(
        name
        for name in checkpoint.get("channel_versions") or {}
        if name not in values
        and (
            name in counters or isinstance(specs.get(name), (DeltaChannel, BinaryOperatorAggregate))
        )
    )


def require_reducers(tup: CheckpointTuple, names: list[str], specs: Mapping[str, Any]) -> None:
    missing = [n for n in names if n not in specs]
    if missing:
        raise InvalidCheckpointInput(
            f"checkpoint {checkpoint_id_of(tup)!r} keeps channel(s) "
            f"{', '.join(missing)} as a delta chain; pass create_channels with their "
            "reducers so the value can be rebuilt",
            field="create_channels",
        )


def rebuild(spec: BaseChannel, history: Mapping[str, Any]) -> Any:
    """One channel's value from its delta history: the seed, then each write replayed."""
    channel = spec.from_checkpoint(history.get("seed", MISSING))
    if isinstance(channel, DeltaChannel):
        channel.replay_writes(history.get("writes") or [])
    else:
        for _, _, value in history.get("writes") or []:
            channel.update([value])
    return channel.get() if channel.is_available() else MISSING


def empty_values(specs: Mapping[str, BaseChannel]) -> dict[str, Any]:
    """What the graph shows for a channel that holds nothing yet: a reducer's empty value.

    LangGraph's ``get_state`` reads every state channel, and a reducer channel such as
    ``Annotated[list, operator.add]`` starts available, as ``[]``.
    """
    found = {}
    for name, spec in specs.items():
        if is_langgraph_channel(name):
            continue
        channel = spec.from_checkpoint(MISSING)
        if channel.is_available():
            found[name] = channel.get()
    return found


def materialised(
    names: list[str], histories: Mapping[str, Any], specs: Mapping[str, BaseChannel]
) -> dict[str, Any]:
    return {name: rebuild(specs[name], histories.get(name) or {}) for name in names}


# -- the snapshot -----------------------------------------------------------------------
def _newer(version: Any, seen: Any) -> bool:
    if seen is None:
        return True
    try:
        return version > seen
    except TypeError:
        return str(version) > str(seen)


def _written_by(tup: CheckpointTuple, parent_seen: Mapping[str, Any] | None) -> list[str]:
    """Nodes that produced this checkpoint: ours say so; LangGraph's show it in versions_seen."""
    stated = tup.metadata.get("written_by")
    if isinstance(stated, list):
        return [str(x) for x in stated]
    seen = seen_nodes(tup.checkpoint.get("versions_seen") or {})
    before = seen_nodes(parent_seen or {})
    return sorted(node for node, versions in seen.items() if before.get(node) != versions)


def _parents(tup: CheckpointTuple) -> list[str]:
    parent = parent_id(tup)
    if parent:
        return [str(parent)]
    forked = tup.metadata.get("forked_from")
    if isinstance(forked, Mapping) and forked.get("checkpoint_id"):
        return [str(forked["checkpoint_id"])]
    return []


def _uuid_text(digest: str) -> str:
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _task_id(checkpoint_id: str, ns: str, step: int, name: str, *parts: str) -> str:
    # LangGraph's own task id, so pending writes and interrupts line up with the tasks
    # they belong to: pull tasks hash (PULL, *triggers), Send tasks (PUSH, index in
    # __pregel_tasks); inside a subgraph the task's namespace is "<subgraph ns>|<node>".
    namespace = binascii.unhexlify(checkpoint_id.replace("-", ""))
    task_ns = f"{ns}|{name}" if ns else name
    joined = "".join([task_ns, str(step), name, *parts])
    return _uuid_text(xxh3_128_hexdigest(namespace + joined.encode()))


def _pull_task_id(
    checkpoint_id: str, ns: str, step: int, name: str, triggers: Sequence[str]
) -> str:
    return _task_id(checkpoint_id, ns, step, name, PULL, *sorted(triggers))


def next_nodes(
    tup: CheckpointTuple,
    rebuilt: Mapping[str, Any],
    node_subscriptions: Mapping[str, Sequence[str]],
) -> list[str]:
    """Nodes that would run next: one of their channels changed since they last saw it."""
    checkpoint = tup.checkpoint
    versions = checkpoint.get("channel_versions") or {}
    values = checkpoint.get("channel_values") or {}
    seen_all = seen_nodes(checkpoint.get("versions_seen") or {})
    found = []
    for node, channels in node_subscriptions.items():
        seen = seen_all.get(node) or {}
        for channel in channels:
            available = channel in values or channel in rebuilt
            if channel.startswith("join:") and not _join_complete(channel, values.get(channel)):
                available = False
            if available and channel in versions and _newer(versions[channel], seen.get(channel)):
                found.append(node)
                break
    return sorted(found)


def _join_complete(name: str, value: Any) -> bool:
    # join:a+b:c is a barrier: c runs once every one of a, b has written to it.
    sources = name.split(":", 2)[1].split("+")
    return isinstance(value, (set, frozenset, list, tuple)) and set(sources) <= set(value)


def stored_pulls(tup: CheckpointTuple) -> dict[str, list[str]]:
    """Nodes that run next, read from the stored channel names alone, with their triggers.

    StateGraph routes through channels named for their target: ``__start__`` triggers
    the node of that name, ``branch:to:x`` triggers x, and ``join:a+b:x`` triggers x once
    a and b both wrote it. A node is next when one of these holds a value newer than the
    version the node last saw. The triggers feed LangGraph's task id.
    """
    checkpoint = tup.checkpoint
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen_all = seen_nodes(checkpoint.get("versions_seen") or {})
    triggers: dict[str, list[str]] = {}
    fired: set[str] = set()
    for name, version in versions.items():
        if name == START_CHANNEL:
            node, ready = START_CHANNEL, True
        elif name.startswith("branch:to:"):
            node, ready = name[len("branch:to:") :], True
        elif name.startswith("join:") and name.count(":") >= 2:
            node = name.rsplit(":", 1)[1]
            ready = _join_complete(name, values.get(name))
        else:
            continue
        triggers.setdefault(node, []).append(name)
        seen = (seen_all.get(node) or {}).get(name)
        if ready and name in values and _newer(version, seen):
            fired.add(node)
    return {node: triggers[node] for node in sorted(fired)}


def _sends(tup: CheckpointTuple) -> list[Send]:
    packets = (tup.checkpoint.get("channel_values") or {}).get(TASKS_CHANNEL)
    return list(packets) if isinstance(packets, (list, tuple)) else []


def pending_tasks_of(
    tup: CheckpointTuple,
    rebuilt: Mapping[str, Any],
    node_subscriptions: Mapping[str, Sequence[str]],
) -> list[dict[str, Any]]:
    """The tasks the next step runs, as LangGraph's ``get_state().tasks`` lists them.

    Pull tasks come from the graph's subscriptions when given, else from the stored
    channel names; Send tasks from the ``__pregel_tasks`` value. Each carries its
    interrupts, error and whether it already finished, read from the pending writes.
    """
    checkpoint_id = checkpoint_id_of(tup)
    ns = tup.config["configurable"].get("checkpoint_ns") or ROOT_NS
    step = tup.metadata.get("step")
    step = (step if isinstance(step, int) else -1) + 1
    # The subscriptions are the root graph's nodes; a subgraph's are read from its store.
    if node_subscriptions and ns == ROOT_NS:
        pulls = {
            n: list(node_subscriptions[n]) for n in next_nodes(tup, rebuilt, node_subscriptions)
        }
    else:
        pulls = stored_pulls(tup)
    tasks = [
        {
            "id": _pull_task_id(checkpoint_id, ns, step, node, triggers),
            "name": node,
            "input": None,
            "path": [PULL, node],
        }
        for node, triggers in sorted(pulls.items())
    ]
    for index, packet in enumerate(_sends(tup)):
        if isinstance(packet, Send):
            task_id = _task_id(checkpoint_id, ns, step, packet.node, PUSH, str(index))
            tasks.append(
                {"id": task_id, "name": packet.node, "input": packet.arg, "path": [PUSH, index]}
            )
    by_id = {task["id"]: task for task in tasks}
    for task in tasks:
        task.update({"interrupts": [], "error": None, "finished": False})
    for task_id, channel, value in tup.pending_writes or []:
        task = by_id.get(task_id)
        if task is None:
            continue
        if channel == INTERRUPT_CHANNEL:
            task["interrupts"].extend(_interrupt(v, task["name"]) for v in _as_list(value))
        elif channel == ERROR_CHANNEL:
            task["error"] = repr(value)
        elif not channel.startswith("__"):
            task["finished"] = True
    return tasks


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _interrupt(value: Any, node: str | None) -> dict[str, Any]:
    return {
        "value": getattr(value, "value", value),
        "id": getattr(value, "id", None),
        "node": node,
    }


def pending_interrupts(
    tup: CheckpointTuple, tasks: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The interrupts stored at this checkpoint, with the node that raised each when known.

    As in LangGraph's ``get_state().interrupts``, an interrupt stays listed on its
    checkpoint after it was answered: the answer moved the thread on to a new one.
    """
    names = {task["id"]: task["name"] for task in tasks}
    found = []
    for task_id, channel, value in tup.pending_writes or []:
        if channel == INTERRUPT_CHANNEL:
            found.extend(_interrupt(v, names.get(task_id)) for v in _as_list(value))
    return found


def build_snapshot(
    tup: CheckpointTuple,
    parent_seen: Mapping[str, Any] | None,
    rebuilt: Mapping[str, Any] | None,
    node_subscriptions: Mapping[str, Sequence[str]],
    defaults: Mapping[str, Any] | None = None,
    durability: Mapping[str, Any] | None = None,
) -> StateSnapshot:
    """The snapshot of ``tup``; ``parent_seen`` is its parent's versions_seen, when known."""
    rebuilt = {k: v for k, v in (rebuilt or {}).items() if v is not MISSING}
    checkpoint = tup.checkpoint
    metadata = tup.metadata or {}
    values = {}
    for name, value in (checkpoint.get("channel_values") or {}).items():
        if not is_langgraph_channel(name):
            values[name] = value.value if isinstance(value, _DeltaSnapshot) else value
    values.update({k: v for k, v in rebuilt.items() if not is_langgraph_channel(k)})
    for name, value in (defaults or {}).items():
        values.setdefault(name, value)
    checkpoint_id = checkpoint_id_of(tup)
    step = metadata.get("step")
    pending_tasks = pending_tasks_of(tup, rebuilt, node_subscriptions)
    pending_writes = [
        {"task_id": task_id, "channel": channel, "value": value}
        for task_id, channel, value in tup.pending_writes or []
    ]
    snap_meta: dict[str, Any] = {
        "step": step,
        "timestamp": checkpoint.get("ts"),
        "source": metadata.get("source"),
        "written_by": _written_by(tup, parent_seen),
        "parents": _parents(tup),
        "last_event_sequence": metadata.get("last_event_sequence"),
    }
    for key in ("forked_from", "rollback"):
        if key in metadata:
            snap_meta[key] = metadata[key]
    return StateSnapshot(
        values=values,
        pending_tasks=pending_tasks,
        pending_writes=pending_writes,
        metadata=snap_meta,
        config=thread_config(
            tup.config["configurable"]["thread_id"],
            checkpoint_id,
            tup.config["configurable"].get("checkpoint_ns"),
        ),
        next=sorted(task["name"] for task in pending_tasks),
        channel_versions=dict(checkpoint.get("channel_versions") or {}),
        interrupts=pending_interrupts(tup, pending_tasks),
        durability=dict(durability) if durability else None,
    )
