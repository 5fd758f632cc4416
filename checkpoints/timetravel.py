"""Time travel over any saver: read state at a checkpoint, walk history, roll back, fork,
and write synthetic supersteps.

Everything here goes through the saver's public interface (get_tuple, list, put,
put_writes, get_delta_channel_history, get_next_version, bump_thread_version), so it works
the same on every provider. Only the root namespace ("") is addressed: subgraph
checkpoints ride along with their parents' and are not navigated on their own.
"""

from __future__ import annotations

import binascii
import copy
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from langgraph._internal._typing import MISSING  # the channels' own "no value" marker
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.errors import InvalidUpdateError
from langgraph.types import Send
from xxhash import xxh3_128_hexdigest

from checkpoints.errors import (
    CheckpointNotFound,
    InvalidCheckpointInput,
    ThreadExists,
    ThreadNotFound,
)

logger = logging.getLogger(__name__)

ROOT_NS = ""
TASKS_CHANNEL = "__pregel_tasks"
SNAPSHOT_BUMPS_KEY = "__snapshot_bumps__"
PULL = "__pregel_pull"
# Metadata our own checkpoints must not inherit from the checkpoint they copy.
NOT_INHERITED = ("_durability", "run_id", "rollback", "forked_from", "written_by")

ChannelFactory = Callable[[], Mapping[str, BaseChannel]]


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
            }
        )


# -- pure helpers: shape snapshots and checkpoints from what the saver returned -----------
def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": str(thread_id), "checkpoint_ns": ROOT_NS}
    if checkpoint_id:
        conf["checkpoint_id"] = str(checkpoint_id)
    return {"configurable": conf}


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


def _seen_nodes(versions_seen: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in versions_seen.items() if k != SNAPSHOT_BUMPS_KEY}


def _written_by(tup: CheckpointTuple, parent_seen: Mapping[str, Any] | None) -> list[str]:
    """Nodes that produced this checkpoint: ours say so; LangGraph's show it in versions_seen."""
    stated = tup.metadata.get("written_by")
    if isinstance(stated, list):
        return [str(x) for x in stated]
    seen = _seen_nodes(tup.checkpoint.get("versions_seen") or {})
    before = _seen_nodes(parent_seen or {})
    return sorted(node for node, versions in seen.items() if before.get(node) != versions)


def _parents(tup: CheckpointTuple) -> list[str]:
    if tup.parent_config:
        parent = (tup.parent_config.get("configurable") or {}).get("checkpoint_id")
        if parent:
            return [str(parent)]
    forked = tup.metadata.get("forked_from")
    if isinstance(forked, Mapping) and forked.get("checkpoint_id"):
        return [str(forked["checkpoint_id"])]
    return []


def _parent_id(tup: CheckpointTuple) -> str | None:
    if not tup.parent_config:
        return None
    return (tup.parent_config.get("configurable") or {}).get("checkpoint_id")


def _task_id(checkpoint_id: str, step: int, name: str, triggers: Sequence[str]) -> str:
    # LangGraph's own id for a pull task, so pending writes line up with pending tasks.
    namespace = binascii.unhexlify(checkpoint_id.replace("-", ""))
    parts = [name, str(step), name, PULL, *sorted(triggers)]
    digest = xxh3_128_hexdigest(namespace + "".join(parts).encode())
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


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

    # -- shaping ------------------------------------------------------------------------
    def _specs(self) -> dict[str, BaseChannel]:
        return dict(self.create_channels()) if self.create_channels else {}

    def _replay_needed(self, tup: CheckpointTuple, specs: Mapping[str, BaseChannel]) -> list[str]:
        """Channels with a version but no stored value that a reducer rebuilds (delta chains)."""
        checkpoint = tup.checkpoint
        values = checkpoint.get("channel_values") or {}
        counters = tup.metadata.get("counters_since_delta_snapshot") or {}
        return sorted(
            name
            for name in checkpoint.get("channel_versions") or {}
            if name not in values
            and (
                name in counters
                or isinstance(specs.get(name), (DeltaChannel, BinaryOperatorAggregate))
            )
        )

    @staticmethod
    def _rebuild(spec: BaseChannel, history: Mapping[str, Any]) -> Any:
        channel = spec.from_checkpoint(history.get("seed", MISSING))
        if isinstance(channel, DeltaChannel):
            channel.replay_writes(history.get("writes") or [])
        else:
            for _, _, value in history.get("writes") or []:
                channel.update([value])
        return channel.get() if channel.is_available() else MISSING

    def _materialised(
        self, tup: CheckpointTuple, names: list[str], histories: Mapping[str, Any], specs
    ) -> dict[str, Any]:
        return {name: self._rebuild(specs[name], histories.get(name) or {}) for name in names}

    def _require_reducers(self, tup: CheckpointTuple, names: list[str], specs) -> None:
        missing = [n for n in names if n not in specs]
        if missing:
            raise InvalidCheckpointInput(
                f"checkpoint {tup.config['configurable']['checkpoint_id']!r} keeps channel(s) "
                f"{', '.join(missing)} as a delta chain; pass create_channels with their "
                "reducers so the value can be rebuilt",
                field="create_channels",
            )

    def _next(self, tup: CheckpointTuple, rebuilt: Mapping[str, Any]) -> list[str]:
        checkpoint = tup.checkpoint
        versions = checkpoint.get("channel_versions") or {}
        values = checkpoint.get("channel_values") or {}
        seen_all = _seen_nodes(checkpoint.get("versions_seen") or {})
        found = []
        for node, channels in self.node_subscriptions.items():
            seen = seen_all.get(node) or {}
            for channel in channels:
                available = channel in values or channel in rebuilt
                if (
                    available
                    and channel in versions
                    and _newer(versions[channel], seen.get(channel))
                ):
                    found.append(node)
                    break
        return sorted(found)

    def _snapshot(
        self,
        tup: CheckpointTuple,
        parent_seen: Mapping[str, Any] | None,
        rebuilt: Mapping[str, Any] | None = None,
    ) -> StateSnapshot:
        rebuilt = {k: v for k, v in (rebuilt or {}).items() if v is not MISSING}
        checkpoint = tup.checkpoint
        metadata = tup.metadata or {}
        values = {}
        for name, value in (checkpoint.get("channel_values") or {}).items():
            if not _is_internal_channel(name):
                values[name] = value.value if isinstance(value, _DeltaSnapshot) else value
        values.update({k: v for k, v in rebuilt.items() if not _is_internal_channel(k)})
        checkpoint_id = tup.config["configurable"]["checkpoint_id"]
        step = metadata.get("step")
        nxt = self._next(tup, rebuilt)
        pending_tasks = [
            {
                "id": _task_id(
                    checkpoint_id,
                    (step if isinstance(step, int) else -1) + 1,
                    node,
                    self.node_subscriptions[node],
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
            config=_config(tup.config["configurable"]["thread_id"], checkpoint_id),
            next=nxt,
            channel_versions=dict(checkpoint.get("channel_versions") or {}),
        )

    # -- shared checks --------------------------------------------------------------------
    @staticmethod
    def _need_thread(tup: CheckpointTuple | None, thread_id: str) -> CheckpointTuple:
        if tup is None:
            raise ThreadNotFound(f"thread {thread_id!r} has no checkpoints", field="thread_id")
        return tup

    @staticmethod
    def _need_checkpoint(
        tup: CheckpointTuple | None, thread_id: str, checkpoint_id: str
    ) -> CheckpointTuple:
        if tup is None:
            raise CheckpointNotFound(
                f"checkpoint {checkpoint_id!r} does not exist in thread {thread_id!r}",
                field="checkpoint_id",
            )
        return tup

    @staticmethod
    def _check_ids(thread_id: Any, checkpoint_id: Any = None) -> None:
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidCheckpointInput(
                f"thread_id must be a non-empty string, got {thread_id!r}", field="thread_id"
            )
        if checkpoint_id is not None and (not isinstance(checkpoint_id, str) or not checkpoint_id):
            raise InvalidCheckpointInput(
                f"checkpoint_id must be a non-empty string, got {checkpoint_id!r}",
                field="checkpoint_id",
            )

    @staticmethod
    def _new_id(after: str) -> str:
        # uuid6 ids are time-ordered; a fresh one sorts after the head unless clocks tie.
        for _ in range(10_000):
            candidate = str(uuid6())
            if candidate > after:
                return candidate
        raise InvalidCheckpointInput(
            f"could not mint a checkpoint id newer than {after!r}: is the clock behind?"
        )

    # -- building the checkpoints time travel writes --------------------------------------
    def _copy_plan(
        self,
        target: CheckpointTuple,
        rebuilt: Mapping[str, Any],
        *,
        new_id: str,
        same_thread: bool,
        metadata_extra: dict[str, Any],
        get_next_version,
    ):
        """The checkpoint, metadata and new_versions of a copy of ``target``."""
        source = target.checkpoint
        values = dict(source.get("channel_values") or {})
        versions = dict(source.get("channel_versions") or {})
        seen = {k: dict(v) for k, v in (source.get("versions_seen") or {}).items()}
        metadata = {k: v for k, v in (target.metadata or {}).items() if k not in NOT_INHERITED}
        counters = dict(metadata.get("counters_since_delta_snapshot") or {})
        for name, value in rebuilt.items():
            if value is MISSING:
                continue
            values[name] = _DeltaSnapshot(value)
            counters.pop(name, None)
            if same_thread:
                # The blob at the old version is stored empty and savers never rewrite a
                # stored version, so the materialised value needs a version of its own.
                old = versions[name]
                versions[name] = get_next_version(old, None)
                for node, node_seen in seen.items():
                    if node != SNAPSHOT_BUMPS_KEY and node_seen.get(name) == old:
                        node_seen[name] = versions[name]
        if counters:
            metadata["counters_since_delta_snapshot"] = counters
        else:
            metadata.pop("counters_since_delta_snapshot", None)
        metadata.update(metadata_extra)
        checkpoint = {
            "v": source.get("v", 4),
            "id": new_id,
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": seen,
            "updated_channels": source.get("updated_channels"),
        }
        return checkpoint, metadata, dict(versions)

    @staticmethod
    def _writes_by_task(tup: CheckpointTuple) -> list[tuple[str, list[tuple[str, Any]]]]:
        grouped: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or []:
            grouped.setdefault(task_id, []).append((channel, value))
        return list(grouped.items())

    def _rollback_plan(self, thread_id, head, target, rebuilt):
        return self._copy_plan(
            target,
            rebuilt,
            new_id=self._new_id(head.config["configurable"]["checkpoint_id"]),
            same_thread=True,
            metadata_extra={
                "source": "rollback",
                "step": target.metadata.get("step"),
                "written_by": ["rollback"],
                "rollback": {
                    "target": target.config["configurable"]["checkpoint_id"],
                    "replaced_head": head.config["configurable"]["checkpoint_id"],
                },
            },
            get_next_version=self.saver.get_next_version,
        )

    def _fork_plan(self, source_thread_id, target, rebuilt):
        checkpoint_id = target.config["configurable"]["checkpoint_id"]
        return self._copy_plan(
            target,
            rebuilt,
            new_id=self._new_id(""),
            same_thread=False,
            metadata_extra={
                "source": "fork",
                "step": target.metadata.get("step"),
                "written_by": ["fork"],
                "forked_from": {"thread_id": source_thread_id, "checkpoint_id": checkpoint_id},
                "last_event_sequence": target.metadata.get("last_event_sequence"),
            },
            get_next_version=self.saver.get_next_version,
        )

    def _validate_supersteps(self, supersteps: Any, specs: Mapping[str, BaseChannel]) -> None:
        if not isinstance(supersteps, Sequence) or isinstance(supersteps, (str, bytes)):
            raise InvalidCheckpointInput(
                f"supersteps must be a list of lists of writes, got {type(supersteps).__name__}",
                field="supersteps",
            )
        if not supersteps:
            raise InvalidCheckpointInput(
                "supersteps is empty: nothing to write", field="supersteps"
            )
        for i, step in enumerate(supersteps):
            if not isinstance(step, Sequence) or isinstance(step, (str, bytes)):
                raise InvalidCheckpointInput(
                    f"supersteps[{i}] must be a list of writes, got {type(step).__name__}",
                    field="supersteps",
                )
            for j, write in enumerate(step):
                if not isinstance(write, Mapping) or "channel" not in write or "value" not in write:
                    raise InvalidCheckpointInput(
                        f"supersteps[{i}][{j}] must be a dict with 'channel' and 'value', "
                        f"got {write!r}",
                        field="supersteps",
                    )
                if write["channel"] not in specs:
                    known = ", ".join(sorted(specs)) or "none"
                    raise InvalidCheckpointInput(
                        f"supersteps[{i}][{j}] writes to channel {write['channel']!r}, which "
                        f"create_channels does not define (known: {known})",
                        field="supersteps",
                    )

    def _bulk_plan(self, head: CheckpointTuple, supersteps, specs, rebuilt):
        """Replay the supersteps through the channels; the checkpoint to store and its versions."""
        thread_id = head.config["configurable"]["thread_id"]
        source = head.checkpoint
        stored = source.get("channel_values") or {}
        versions = dict(source.get("channel_versions") or {})
        channels: dict[str, BaseChannel] = {}
        for name, spec in specs.items():
            if name in rebuilt:
                value = rebuilt[name]
                channel = spec.from_checkpoint(
                    MISSING if value is MISSING else _DeltaSnapshot(value)
                )
            else:
                channel = spec.from_checkpoint(stored.get(name, MISSING))
            channels[name] = channel
        new_versions: dict[str, Any] = {}
        touched: set[str] = set()
        for i, step in enumerate(supersteps):
            by_channel: dict[str, list[Any]] = {}
            for write in step:
                by_channel.setdefault(write["channel"], []).append(write["value"])
            for name, values in by_channel.items():
                try:
                    channels[name].update(values)
                except (InvalidUpdateError, TypeError, ValueError) as exc:
                    raise InvalidCheckpointInput(
                        f"supersteps[{i}] cannot update channel {name!r} of thread "
                        f"{thread_id!r}: {exc}",
                        field="supersteps",
                    ) from exc
                versions[name] = self.saver.get_next_version(versions.get(name), None)
                new_versions[name] = versions[name]
                touched.add(name)
        values = dict(stored)
        metadata = {k: v for k, v in (head.metadata or {}).items() if k not in NOT_INHERITED}
        counters = dict(metadata.get("counters_since_delta_snapshot") or {})
        for name in touched:
            channel = channels[name]
            if isinstance(channel, DeltaChannel):
                # Stored whole so the new checkpoint never depends on a replay chain.
                values[name] = _DeltaSnapshot(channel.get())
                counters.pop(name, None)
            else:
                value = channel.checkpoint()
                if value is MISSING:
                    values.pop(name, None)
                else:
                    values[name] = value
        if counters:
            metadata["counters_since_delta_snapshot"] = counters
        else:
            metadata.pop("counters_since_delta_snapshot", None)
        step = head.metadata.get("step")
        metadata.update(
            {
                "source": "bulk_update",
                "step": (step if isinstance(step, int) else -1) + len(supersteps),
                "written_by": ["bulk_update"],
            }
        )
        checkpoint = {
            "v": source.get("v", 4),
            "id": self._new_id(head.config["configurable"]["checkpoint_id"]),
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {k: dict(v) for k, v in (source.get("versions_seen") or {}).items()},
            "updated_channels": sorted(touched),
        }
        return checkpoint, metadata, new_versions

    def _bulk_delta_names(self, head, specs) -> list[str]:
        return [n for n in self._replay_needed(head, specs) if n in specs]

    @staticmethod
    def _lineage_step(tup: CheckpointTuple | None) -> dict[str, str] | None:
        if tup is None:
            return None
        forked = tup.metadata.get("forked_from")
        if isinstance(forked, Mapping) and forked.get("thread_id") and forked.get("checkpoint_id"):
            return {
                "thread_id": str(forked["thread_id"]),
                "checkpoint_id": str(forked["checkpoint_id"]),
            }
        return None

    def _fire_forked(self, source_thread_id, checkpoint_id, new_thread_id, snapshot) -> None:
        from checkpoints.signals import thread_forked

        results = thread_forked.send_robust(
            sender=type(self),
            saver=self.saver,
            source_thread_id=source_thread_id,
            checkpoint_id=checkpoint_id,
            new_thread_id=new_thread_id,
            snapshot=snapshot,
        )
        for receiver, outcome in results:
            if isinstance(outcome, Exception):
                logger.error(
                    "thread_forked receiver %r failed for fork of %r at %r into %r; "
                    "the fork stands",
                    receiver,
                    source_thread_id,
                    checkpoint_id,
                    new_thread_id,
                    exc_info=outcome,
                )

    # ======================================================================================
    # sync API
    # ======================================================================================
    def _get(self, thread_id: str, checkpoint_id: str | None = None) -> CheckpointTuple | None:
        return self.saver.get_tuple(_config(thread_id, checkpoint_id))

    def _load(self, thread_id: str, checkpoint_id: str | None) -> CheckpointTuple:
        self._check_ids(thread_id, checkpoint_id)
        if checkpoint_id is None:
            return self._need_thread(self._get(thread_id), thread_id)
        found = self._get(thread_id, checkpoint_id)
        if found is None:
            self._need_thread(self._get(thread_id), thread_id)
        return self._need_checkpoint(found, thread_id, checkpoint_id)

    def _rebuilt(self, tup: CheckpointTuple, specs, *, required: bool) -> dict[str, Any]:
        names = self._replay_needed(tup, specs)
        if required:
            self._require_reducers(tup, names, specs)
        names = [n for n in names if n in specs]
        if not names:
            return {}
        histories = self.saver.get_delta_channel_history(config=tup.config, channels=names)
        return self._materialised(tup, names, histories, specs)

    def _parent_seen(self, tup: CheckpointTuple, ahead: CheckpointTuple | None):
        if isinstance(tup.metadata.get("written_by"), list):
            return None
        parent = _parent_id(tup)
        if parent is None:
            return None
        if ahead is not None and ahead.config["configurable"]["checkpoint_id"] == parent:
            return ahead.checkpoint.get("versions_seen") or {}
        found = self._get(tup.config["configurable"]["thread_id"], parent)
        return (found.checkpoint.get("versions_seen") or {}) if found else None

    def get_state(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        """The state at ``checkpoint_id``, or at the thread's newest checkpoint."""
        tup = self._load(thread_id, checkpoint_id)
        specs = self._specs()
        return self._snapshot(
            tup, self._parent_seen(tup, None), self._rebuilt(tup, specs, required=False)
        )

    def _history_args(self, thread_id, limit, before, source, filter=None):
        self._check_ids(thread_id, before)
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 0
        ):
            raise InvalidCheckpointInput(
                f"limit must be a whole number >= 0, got {limit!r}", field="limit"
            )
        if source is not None and not isinstance(source, str):
            raise InvalidCheckpointInput(f"source must be a string, got {source!r}", field="source")
        if filter is not None and not isinstance(filter, dict):
            raise InvalidCheckpointInput(
                f"filter must be a dict of metadata key to value, got {filter!r}", field="filter"
            )
        wanted = {**(filter or {}), **({"source": source} if source else {})}
        return {
            "filter": wanted or None,
            "before": _config(thread_id, before) if before else None,
            # One extra row so the last snapshot can find its parent without another read.
            "limit": None if limit is None else limit + 1,
        }

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
        """
        args = self._history_args(thread_id, limit, before, source, filter)
        self._load(thread_id, before)
        return self._history(thread_id, limit, args)

    def _history(self, thread_id, limit, args) -> Iterator[StateSnapshot]:
        specs = self._specs()
        rows = self.saver.list(_config(thread_id), **args)
        current = next(rows, None)
        produced = 0
        while current is not None and (limit is None or produced < limit):
            ahead = next(rows, None)
            yield self._snapshot(
                current,
                self._parent_seen(current, ahead),
                self._rebuilt(current, specs, required=False),
            )
            produced += 1
            current = ahead

    def rollback(
        self, thread_id: str, checkpoint_id: str, expected_version: int | None = None
    ) -> StateSnapshot:
        """Write a new head equal in state to ``checkpoint_id``; bump the thread version."""
        self._check_ids(thread_id, checkpoint_id)
        head = self._load(thread_id, None)
        target = self._load(thread_id, checkpoint_id)
        specs = self._specs()
        rebuilt = self._rebuilt(target, specs, required=True)
        checkpoint, metadata, new_versions = self._rollback_plan(thread_id, head, target, rebuilt)
        self.saver.bump_thread_version(thread_id, expected=expected_version)
        stored = self.saver.put(
            _config(thread_id, checkpoint_id), checkpoint, metadata, new_versions
        )
        for task_id, writes in self._writes_by_task(target):
            self.saver.put_writes(stored, writes, task_id)
        return self.get_state(thread_id, checkpoint["id"])

    def fork(
        self, source_thread_id: str, checkpoint_id: str, new_thread_id: str | None = None
    ) -> StateSnapshot:
        """Copy the state at ``checkpoint_id`` into a new thread; the source is untouched."""
        self._check_ids(source_thread_id, checkpoint_id)
        new_thread_id = str(uuid.uuid4()) if new_thread_id is None else new_thread_id
        self._check_ids(new_thread_id)
        target = self._load(source_thread_id, checkpoint_id)
        if self._get(new_thread_id) is not None:
            raise ThreadExists(
                f"cannot fork {source_thread_id!r} at {checkpoint_id!r} onto thread "
                f"{new_thread_id!r}: it already holds checkpoints",
                field="new_thread_id",
            )
        rebuilt = self._rebuilt(target, self._specs(), required=True)
        checkpoint, metadata, new_versions = self._fork_plan(source_thread_id, target, rebuilt)
        stored = self.saver.put(_config(new_thread_id), checkpoint, metadata, new_versions)
        for task_id, writes in self._writes_by_task(target):
            self.saver.put_writes(stored, writes, task_id)
        snapshot = self.get_state(new_thread_id, checkpoint["id"])
        self._fire_forked(source_thread_id, checkpoint_id, new_thread_id, snapshot)
        return snapshot

    def bulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]]
    ) -> StateSnapshot:
        """Replay synthetic supersteps through the reducers; store one bulk_update checkpoint."""
        self._check_ids(thread_id)
        specs = self._specs()
        self._validate_supersteps(supersteps, specs)
        head = self._get(thread_id)
        if head is None:
            raise ThreadNotFound(
                f"thread {thread_id!r} has no checkpoint to update; use fork to seed a new thread",
                field="thread_id",
            )
        names = self._bulk_delta_names(head, specs)
        histories = (
            self.saver.get_delta_channel_history(config=head.config, channels=names)
            if names
            else {}
        )
        rebuilt = self._materialised(head, names, histories, specs)
        checkpoint, metadata, new_versions = self._bulk_plan(head, supersteps, specs, rebuilt)
        self.saver.put(head.config, checkpoint, metadata, new_versions)
        return self.get_state(thread_id, checkpoint["id"])

    def lineage(self, thread_id: str) -> list[dict[str, str]]:
        """The thread at its head, then each checkpoint it was forked from, back to the origin."""
        head = self._load(thread_id, None)
        steps = [
            {"thread_id": thread_id, "checkpoint_id": head.config["configurable"]["checkpoint_id"]}
        ]
        seen = {thread_id}
        current = thread_id
        while True:
            first = next(
                iter(self.saver.list(_config(current), filter={"source": "fork"}, limit=1)), None
            )
            step = self._lineage_step(first)
            if step is None or step["thread_id"] in seen:
                return steps
            steps.append(step)
            seen.add(step["thread_id"])
            current = step["thread_id"]

    # ======================================================================================
    # async API: the same steps through the saver's async methods
    # ======================================================================================
    async def _aget(self, thread_id: str, checkpoint_id: str | None = None):
        return await self.saver.aget_tuple(_config(thread_id, checkpoint_id))

    async def _aload(self, thread_id: str, checkpoint_id: str | None) -> CheckpointTuple:
        self._check_ids(thread_id, checkpoint_id)
        if checkpoint_id is None:
            return self._need_thread(await self._aget(thread_id), thread_id)
        found = await self._aget(thread_id, checkpoint_id)
        if found is None:
            self._need_thread(await self._aget(thread_id), thread_id)
        return self._need_checkpoint(found, thread_id, checkpoint_id)

    async def _arebuilt(self, tup: CheckpointTuple, specs, *, required: bool) -> dict[str, Any]:
        names = self._replay_needed(tup, specs)
        if required:
            self._require_reducers(tup, names, specs)
        names = [n for n in names if n in specs]
        if not names:
            return {}
        histories = await self.saver.aget_delta_channel_history(config=tup.config, channels=names)
        return self._materialised(tup, names, histories, specs)

    async def _aparent_seen(self, tup: CheckpointTuple, ahead: CheckpointTuple | None):
        if isinstance(tup.metadata.get("written_by"), list):
            return None
        parent = _parent_id(tup)
        if parent is None:
            return None
        if ahead is not None and ahead.config["configurable"]["checkpoint_id"] == parent:
            return ahead.checkpoint.get("versions_seen") or {}
        found = await self._aget(tup.config["configurable"]["thread_id"], parent)
        return (found.checkpoint.get("versions_seen") or {}) if found else None

    async def aget_state(self, thread_id: str, checkpoint_id: str | None = None) -> StateSnapshot:
        tup = await self._aload(thread_id, checkpoint_id)
        specs = self._specs()
        return self._snapshot(
            tup,
            await self._aparent_seen(tup, None),
            await self._arebuilt(tup, specs, required=False),
        )

    async def aget_state_history(
        self,
        thread_id: str,
        limit: int | None = None,
        before: str | None = None,
        source: str | None = None,
        filter: dict | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of get_state_history; bad arguments raise at the first iteration."""
        args = self._history_args(thread_id, limit, before, source, filter)
        await self._aload(thread_id, before)
        specs = self._specs()
        rows = self.saver.alist(_config(thread_id), **args).__aiter__()

        async def following():
            try:
                return await rows.__anext__()
            except StopAsyncIteration:
                return None

        current = await following()
        produced = 0
        while current is not None and (limit is None or produced < limit):
            ahead = await following()
            yield self._snapshot(
                current,
                await self._aparent_seen(current, ahead),
                await self._arebuilt(current, specs, required=False),
            )
            produced += 1
            current = ahead

    async def arollback(
        self, thread_id: str, checkpoint_id: str, expected_version: int | None = None
    ) -> StateSnapshot:
        self._check_ids(thread_id, checkpoint_id)
        head = await self._aload(thread_id, None)
        target = await self._aload(thread_id, checkpoint_id)
        specs = self._specs()
        rebuilt = await self._arebuilt(target, specs, required=True)
        checkpoint, metadata, new_versions = self._rollback_plan(thread_id, head, target, rebuilt)
        await self._abump(thread_id, expected_version)
        stored = await self.saver.aput(
            _config(thread_id, checkpoint_id), checkpoint, metadata, new_versions
        )
        for task_id, writes in self._writes_by_task(target):
            await self.saver.aput_writes(stored, writes, task_id)
        return await self.aget_state(thread_id, checkpoint["id"])

    async def _abump(self, thread_id: str, expected: int | None) -> int:
        abump = getattr(self.saver, "abump_thread_version", None)
        if abump is not None:
            return await abump(thread_id, expected=expected)
        return await sync_to_async(self.saver.bump_thread_version, thread_sensitive=True)(
            thread_id, expected=expected
        )

    async def afork(
        self, source_thread_id: str, checkpoint_id: str, new_thread_id: str | None = None
    ) -> StateSnapshot:
        self._check_ids(source_thread_id, checkpoint_id)
        new_thread_id = str(uuid.uuid4()) if new_thread_id is None else new_thread_id
        self._check_ids(new_thread_id)
        target = await self._aload(source_thread_id, checkpoint_id)
        if await self._aget(new_thread_id) is not None:
            raise ThreadExists(
                f"cannot fork {source_thread_id!r} at {checkpoint_id!r} onto thread "
                f"{new_thread_id!r}: it already holds checkpoints",
                field="new_thread_id",
            )
        rebuilt = await self._arebuilt(target, self._specs(), required=True)
        checkpoint, metadata, new_versions = self._fork_plan(source_thread_id, target, rebuilt)
        stored = await self.saver.aput(_config(new_thread_id), checkpoint, metadata, new_versions)
        for task_id, writes in self._writes_by_task(target):
            await self.saver.aput_writes(stored, writes, task_id)
        snapshot = await self.aget_state(new_thread_id, checkpoint["id"])
        # Receivers are plain Django ones and may touch the ORM.
        await sync_to_async(self._fire_forked, thread_sensitive=True)(
            source_thread_id, checkpoint_id, new_thread_id, snapshot
        )
        return snapshot

    async def abulk_update_state(
        self, thread_id: str, supersteps: Sequence[Sequence[Mapping[str, Any]]]
    ) -> StateSnapshot:
        self._check_ids(thread_id)
        specs = self._specs()
        self._validate_supersteps(supersteps, specs)
        head = await self._aget(thread_id)
        if head is None:
            raise ThreadNotFound(
                f"thread {thread_id!r} has no checkpoint to update; use fork to seed a new thread",
                field="thread_id",
            )
        names = self._bulk_delta_names(head, specs)
        histories = (
            await self.saver.aget_delta_channel_history(config=head.config, channels=names)
            if names
            else {}
        )
        rebuilt = self._materialised(head, names, histories, specs)
        checkpoint, metadata, new_versions = self._bulk_plan(head, supersteps, specs, rebuilt)
        await self.saver.aput(head.config, checkpoint, metadata, new_versions)
        return await self.aget_state(thread_id, checkpoint["id"])

    async def alineage(self, thread_id: str) -> list[dict[str, str]]:
        head = await self._aload(thread_id, None)
        steps = [
            {"thread_id": thread_id, "checkpoint_id": head.config["configurable"]["checkpoint_id"]}
        ]
        seen = {thread_id}
        current = thread_id
        while True:
            first = None
            async for item in self.saver.alist(
                _config(current), filter={"source": "fork"}, limit=1
            ):
                first = item
                break
            step = self._lineage_step(first)
            if step is None or step["thread_id"] in seen:
                return steps
            steps.append(step)
            seen.add(step["thread_id"])
            current = step["thread_id"]


__all__ = ["TimeTravel", "StateSnapshot"]
