"""What time travel shows: :class:`StateSnapshot`, built from what a saver returned.

Pure: nothing here reads or writes the store. Only the root namespace ("") is addressed.
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

from checkpoints.errors import InvalidCheckpointInput

ROOT_NS = ""
TASKS_CHANNEL = "__pregel_tasks"
SNAPSHOT_BUMPS_KEY = "__snapshot_bumps__"
PULL = "__pregel_pull"


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
                "durability": self.durability,
            }
        )


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    """The saver config addressing a thread's root namespace, or one of its checkpoints."""
    conf: dict[str, Any] = {"thread_id": str(thread_id), "checkpoint_ns": ROOT_NS}
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


def materialised(
    names: list[str], histories: Mapping[str, Any], specs: Mapping[str, BaseChannel]
) -> dict[str, Any]:
    return {name: rebuild(specs[name], histories.get(name) or {}) for name in names}


# -- the snapshot -----------------------------------------------------------------------
def _is_internal_channel(name: str) -> bool:
    # LangGraph's bookkeeping channels: __start__, __pregel_tasks, branch:to:x, join:a+b:c.
    return name.startswith("__") or name.startswith("branch:") or name.startswith("join:")


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


def _task_id(checkpoint_id: str, step: int, name: str, triggers: Sequence[str]) -> str:
    # LangGraph's own id for a pull task, so pending writes line up with pending tasks.
    namespace = binascii.unhexlify(checkpoint_id.replace("-", ""))
    parts = [name, str(step), name, PULL, *sorted(triggers)]
    digest = xxh3_128_hexdigest(namespace + "".join(parts).encode())
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


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
            if available and channel in versions and _newer(versions[channel], seen.get(channel)):
                found.append(node)
                break
    return sorted(found)


def build_snapshot(
    tup: CheckpointTuple,
    parent_seen: Mapping[str, Any] | None,
    rebuilt: Mapping[str, Any] | None,
    node_subscriptions: Mapping[str, Sequence[str]],
    durability: Mapping[str, Any] | None = None,
) -> StateSnapshot:
    """The snapshot of ``tup``; ``parent_seen`` is its parent's versions_seen, when known."""
    rebuilt = {k: v for k, v in (rebuilt or {}).items() if v is not MISSING}
    checkpoint = tup.checkpoint
    metadata = tup.metadata or {}
    values = {}
    for name, value in (checkpoint.get("channel_values") or {}).items():
        if not _is_internal_channel(name):
            values[name] = value.value if isinstance(value, _DeltaSnapshot) else value
    values.update({k: v for k, v in rebuilt.items() if not _is_internal_channel(k)})
    checkpoint_id = checkpoint_id_of(tup)
    step = metadata.get("step")
    nxt = next_nodes(tup, rebuilt, node_subscriptions)
    pending_tasks = [
        {
            "id": _task_id(
                checkpoint_id,
                (step if isinstance(step, int) else -1) + 1,
                node,
                node_subscriptions[node],
            ),
            "name": node,
            "input": None,
        }
        for node in nxt
    ]
    pending_writes = []
    for task_id, channel, value in tup.pending_writes or []:
        pending_writes.append({"task_id": task_id, "channel": channel, "value": value})
        if channel == TASKS_CHANNEL and isinstance(value, Send):
            pending_tasks.append({"id": task_id, "name": value.node, "input": value.arg})
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
        config=thread_config(tup.config["configurable"]["thread_id"], checkpoint_id),
        next=nxt,
        channel_versions=dict(checkpoint.get("channel_versions") or {}),
        durability=dict(durability) if durability else None,
    )
