"""What time travel writes, decided without touching the store.

One subject: the pure decisions behind every write (plans and the argument checks they
rely on), kept apart from the I/O so each can be tested without a store.

Each plan takes the checkpoint tuples already read (and any delta-chain values rebuilt
for them) and returns the checkpoint, metadata and new versions to ``put``: a rollback's
new head, a fork's first checkpoint, a bulk update's replayed superstep. The argument
checks every operation shares live here too, so they run before any I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from langgraph._internal._typing import MISSING
from langgraph.channels.base import BaseChannel
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.errors import InvalidUpdateError

from checkpoints.channels import is_langgraph_channel
from checkpoints.errors import (
    CheckpointNotFound,
    InvalidCheckpointInput,
    ThreadNotFound,
    ThreadVersionConflict,
)
from checkpoints.timetravel.snapshot import (
    SNAPSHOT_BUMPS_KEY,
    checkpoint_id_of,
    thread_config,
)

# Metadata our own checkpoints must not inherit from the checkpoint they copy.
# The keys the store itself writes into a checkpoint's metadata: the durability stamp and
# what a rollback, a fork or a bulk update records.
STORE_WRITTEN_KEYS = ("_durability", "rollback", "forked_from", "written_by")
NOT_INHERITED = ("run_id", *STORE_WRITTEN_KEYS)

NextVersion = Callable[[Any, Any], Any]


class PlannedCheckpoint(NamedTuple):
    """What one ``put`` stores."""

    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    new_versions: dict[str, Any]


# -- argument checks ----------------------------------------------------------------------
VERSION_DIGITS = 9


def expected_version_of(raw: Any, field: str = "expected_version") -> int | None:
    """The thread version a caller expects, from an int or form text; None when not given.

    Text is ASCII digits only: ``str.isdigit`` also passes "²" and "٣", which ``int``
    refuses, and more digits than any version has would only fail later, in the query.
    """
    if raw is None or raw == "":
        return None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    text = raw.strip() if isinstance(raw, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= VERSION_DIGITS:
        return int(text)
    raise InvalidCheckpointInput(
        f"{field} must be the thread's version, a whole number of at most {VERSION_DIGITS} "
        f"digits; got {raw!r:.100}",
        field=field,
    )


# Longer than any checkpoint id a saver mints (36 characters) by far; a longer "head" is
# not an id the caller was shown.
HEAD_ID_CHARS = 1024


def expected_head_of(raw: Any, field: str = "expected_head") -> str | None:
    """The head checkpoint id a caller saw, or None when not given.

    The thread's version counts rollbacks only: a graph's own turn moves the head without
    bumping it, so a caller that must not replace a head it never saw names that head.
    """
    if raw is None:
        return None
    # The API's schema declares this shape (non-empty, no NUL, bounded), and schema-valid
    # input is never refused: any other string is an id no head has, answered as a moved
    # head (409), which is what it is.
    if isinstance(raw, str) and raw and len(raw) <= HEAD_ID_CHARS and "\x00" not in raw:
        return raw
    raise InvalidCheckpointInput(
        f"{field} must be the id of the head checkpoint the caller saw (1 to "
        f"{HEAD_ID_CHARS} characters, no NUL); got {raw!r:.100}",
        field=field,
    )


def check_head(head: CheckpointTuple, expected: str | None, thread_id: str, ns: str = "") -> None:
    """Refuse when the namespace's head is not the one the caller saw (None: not checked)."""
    current = checkpoint_id_of(head)
    if expected is None or current == expected:
        return
    where = f"thread {thread_id!r}" + (f" (namespace {ns!r})" if ns else "")
    raise ThreadVersionConflict(
        f"{where} moved on since it was read: its head is now {current!r}, not {expected!r}; "
        "nothing was changed",
        field="expected_head",
    )


def check_ids(thread_id: Any, checkpoint_id: Any = None, checkpoint_ns: Any = "") -> None:
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidCheckpointInput(
            f"thread_id must be a non-empty string, got {thread_id!r}", field="thread_id"
        )
    if checkpoint_id is not None and (not isinstance(checkpoint_id, str) or not checkpoint_id):
        raise InvalidCheckpointInput(
            f"checkpoint_id must be a non-empty string, got {checkpoint_id!r}",
            field="checkpoint_id",
        )
    if not isinstance(checkpoint_ns, str):
        raise InvalidCheckpointInput(
            f"checkpoint_ns must be a string, got {checkpoint_ns!r}", field="checkpoint_ns"
        )


def need_thread(tup: CheckpointTuple | None, thread_id: str, ns: str = "") -> CheckpointTuple:
    if tup is None:
        if ns:
            raise ThreadNotFound(
                f"thread {thread_id!r} has no checkpoints in namespace {ns!r}",
                field="checkpoint_ns",
            )
        raise ThreadNotFound(f"thread {thread_id!r} has no checkpoints", field="thread_id")
    return tup


def need_checkpoint(
    tup: CheckpointTuple | None, thread_id: str, checkpoint_id: str
) -> CheckpointTuple:
    if tup is None:
        raise CheckpointNotFound(
            f"checkpoint {checkpoint_id!r} does not exist in thread {thread_id!r}",
            field="checkpoint_id",
        )
    return tup


def need_bulk_head(head: CheckpointTuple | None, thread_id: str) -> CheckpointTuple:
    if head is None:
        raise ThreadNotFound(
            f"thread {thread_id!r} has no checkpoint to update; use fork to seed a new thread",
            field="thread_id",
        )
    return head


def history_args(
    thread_id: Any, limit: Any, before: Any, source: Any, filter: Any = None, ns: Any = ""
) -> dict[str, Any]:
    """The saver ``list`` arguments of a history walk, after checking each one."""
    check_ids(thread_id, before, ns)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
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
        "before": thread_config(thread_id, before, ns) if before else None,
        # One extra row so the last snapshot can find its parent without another read.
        "limit": None if limit is None else limit + 1,
    }


def validate_supersteps(supersteps: Any, specs: Mapping[str, BaseChannel] | None) -> None:
    """The shape of ``supersteps``; and, given ``specs``, that each channel is defined."""
    if not isinstance(supersteps, Sequence) or isinstance(supersteps, (str, bytes)):
        raise InvalidCheckpointInput(
            f"supersteps must be a list of lists of writes, got {type(supersteps).__name__}",
            field="supersteps",
        )
    if not supersteps:
        raise InvalidCheckpointInput("supersteps is empty: nothing to write", field="supersteps")
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
            if specs is not None and write["channel"] not in specs:
                known = ", ".join(sorted(specs)) or "none"
                raise InvalidCheckpointInput(
                    f"supersteps[{i}][{j}] writes to channel {write['channel']!r}, which "
                    f"create_channels does not define (known: {known})",
                    field="supersteps",
                )


def refuse_strangers(
    thread_id: str, channels: Sequence[str], rows: Sequence[CheckpointTuple]
) -> None:
    """Without the thread's graph, a write only to a channel its checkpoints (``rows``, the
    newest) have held: a name it never stored is more likely a typo than a new channel, and
    nothing could tell. A rollback to an early checkpoint keeps the later ones listed."""
    held = {name for row in rows for name in row.checkpoint.get("channel_versions") or {}}
    strangers = [name for name in channels if name not in held]
    if strangers:
        known = ", ".join(sorted(n for n in held if not is_langgraph_channel(n)))
        raise InvalidCheckpointInput(
            f"refusing a bulk update of thread {thread_id!r}: it holds no channel "
            f"{', '.join(repr(n) for n in strangers)} (its channels: {known or 'none'}); "
            'register the graph that writes it in CHECKPOINTS["GRAPHS"] to add a channel',
            field="supersteps",
        )


def new_id(after: str) -> str:
    """A fresh checkpoint id that sorts after ``after``."""
    # uuid6 ids are time-ordered; a fresh one sorts after the head unless clocks tie.
    for _ in range(10_000):
        candidate = str(uuid6())
        if candidate > after:
            return candidate
    raise InvalidCheckpointInput(
        f"could not mint a checkpoint id newer than {after!r}: is the clock behind?"
    )


# -- plans ----------------------------------------------------------------------------------
def _inherited_metadata(tup: CheckpointTuple) -> dict[str, Any]:
    return {k: v for k, v in (tup.metadata or {}).items() if k not in NOT_INHERITED}


def _set_counters(metadata: dict[str, Any], counters: dict[str, Any]) -> None:
    if counters:
        metadata["counters_since_delta_snapshot"] = counters
    else:
        metadata.pop("counters_since_delta_snapshot", None)


def _checkpoint(
    source: Mapping[str, Any],
    checkpoint_id: str,
    values: dict[str, Any],
    versions: dict[str, Any],
    seen: dict[str, Any],
    updated: Any,
) -> dict[str, Any]:
    return {
        "v": source.get("v", 4),
        "id": checkpoint_id,
        "ts": datetime.now(UTC).isoformat(),
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": seen,
        "updated_channels": updated,
    }


def _copy_plan(
    target: CheckpointTuple,
    rebuilt: Mapping[str, Any],
    *,
    kind: str,
    checkpoint_id: str,
    same_thread: bool,
    metadata_extra: dict[str, Any],
    get_next_version: NextVersion,
) -> PlannedCheckpoint:
    """A copy of ``target`` with its delta-chain channels stored whole, written by ``kind``.

    It is what LangGraph's ``update_state(target_config, None)`` leaves: the target's
    channels, versions and versions_seen on a new checkpoint that has no pending writes.
    None of the target's writes may follow: resume values would answer interrupts that
    must be asked again, task results and errors would stand for tasks that run again
    (the copy gets a new checkpoint id, so every task gets a new id), and ``Send``
    packets are already in the ``__pregel_tasks`` channel value. ``updated_channels`` is
    cleared as ``update_state`` clears it, so the next step considers every node.
    """
    source = target.checkpoint
    values = dict(source.get("channel_values") or {})
    versions = dict(source.get("channel_versions") or {})
    seen = {k: dict(v) for k, v in (source.get("versions_seen") or {}).items()}
    metadata = _inherited_metadata(target)
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
    _set_counters(metadata, counters)
    metadata.update(
        {"source": kind, "step": target.metadata.get("step"), "written_by": [kind]},
        **metadata_extra,
    )
    checkpoint = _checkpoint(source, checkpoint_id, values, versions, seen, None)
    return PlannedCheckpoint(checkpoint, metadata, dict(versions))


def rollback_plan(
    head: CheckpointTuple,
    target: CheckpointTuple,
    rebuilt: Mapping[str, Any],
    get_next_version: NextVersion,
) -> PlannedCheckpoint:
    """A new head on the same thread equal in state to ``target``."""
    return _copy_plan(
        target,
        rebuilt,
        kind="rollback",
        checkpoint_id=new_id(checkpoint_id_of(head)),
        same_thread=True,
        metadata_extra={
            "rollback": {
                "target": checkpoint_id_of(target),
                "replaced_head": checkpoint_id_of(head),
            },
        },
        get_next_version=get_next_version,
    )


def fork_plan(
    source_thread_id: str,
    target: CheckpointTuple,
    rebuilt: Mapping[str, Any],
    get_next_version: NextVersion,
) -> PlannedCheckpoint:
    """The first checkpoint of a new thread copied from ``target``."""
    return _copy_plan(
        target,
        rebuilt,
        kind="fork",
        checkpoint_id=new_id(""),
        same_thread=False,
        metadata_extra={
            "forked_from": {
                "thread_id": source_thread_id,
                "checkpoint_id": checkpoint_id_of(target),
            },
            "last_event_sequence": target.metadata.get("last_event_sequence"),
        },
        get_next_version=get_next_version,
    )


def bulk_plan(
    head: CheckpointTuple,
    supersteps: Sequence[Sequence[Mapping[str, Any]]],
    specs: Mapping[str, BaseChannel],
    rebuilt: Mapping[str, Any],
    get_next_version: NextVersion,
) -> PlannedCheckpoint:
    """Replay the supersteps through the channels; the checkpoint to store and its versions."""
    thread_id = head.config["configurable"]["thread_id"]
    source = head.checkpoint
    stored = source.get("channel_values") or {}
    versions = dict(source.get("channel_versions") or {})
    channels: dict[str, BaseChannel] = {}
    for name, spec in specs.items():
        if name in rebuilt:
            value = rebuilt[name]
            channel = spec.from_checkpoint(MISSING if value is MISSING else _DeltaSnapshot(value))
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
            versions[name] = get_next_version(versions.get(name), None)
            new_versions[name] = versions[name]
            touched.add(name)
    values = dict(stored)
    metadata = _inherited_metadata(head)
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
    _set_counters(metadata, counters)
    step = head.metadata.get("step")
    metadata.update(
        {
            "source": "bulk_update",
            "step": (step if isinstance(step, int) else -1) + len(supersteps),
            "written_by": ["bulk_update"],
        }
    )
    seen = {k: dict(v) for k, v in (source.get("versions_seen") or {}).items()}
    checkpoint = _checkpoint(
        source, new_id(checkpoint_id_of(head)), values, versions, seen, sorted(touched)
    )
    return PlannedCheckpoint(checkpoint, metadata, new_versions)


# -- channels without a known reducer -------------------------------------------------------
# How many of a thread's newest checkpoints are read for evidence of a reducer.
EVIDENCE_ROWS = 1000


def last_write_per_channel(step: Sequence[Mapping[str, Any]], names: set[str]) -> list:
    """One write per channel in ``names`` (the later wins), as a last-value channel keeps."""
    kept: dict[Any, Mapping[str, Any]] = {}
    for i, write in enumerate(step):
        key = write["channel"] if write["channel"] in names else ("#", i)
        kept.pop(key, None)
        kept[key] = write
    return list(kept.values())


def reducer_evidence(rows: Sequence[CheckpointTuple], names: Sequence[str]) -> dict[str, str]:
    """Channels among ``names`` that the stored history shows to have a reducer, and why.

    Read from what is stored alone: a DeltaChannel leaves its marks (a snapshot value,
    a counter in the metadata); any other reducer shows where a step's writes did not
    simply replace the value: the channel took several writes in one step, which a
    last-value channel refuses, or its new value differs from the one value written.
    ``rows`` are the thread's checkpoints, in any order.
    """
    wanted = set(names)
    found: dict[str, str] = {}
    by_id = {checkpoint_id_of(row): row for row in rows}
    for row in rows:
        values = row.checkpoint.get("channel_values") or {}
        counters = row.metadata.get("counters_since_delta_snapshot") or {}
        for name in wanted - set(found):
            if name in counters or isinstance(values.get(name), _DeltaSnapshot):
                found[name] = "it is a DeltaChannel"
        parent_config = (row.parent_config or {}).get("configurable") or {}
        parent = by_id.get(parent_config.get("checkpoint_id"))
        if parent is None:
            continue
        before = parent.checkpoint.get("channel_versions") or {}
        after = row.checkpoint.get("channel_versions") or {}
        written: dict[str, list[Any]] = {}
        for _, channel, value in parent.pending_writes or []:
            if channel in wanted and channel not in found:
                written.setdefault(channel, []).append(value)
        step = row.metadata.get("step")
        for channel, writes in written.items():
            if after.get(channel) == before.get(channel) or channel not in values:
                continue  # this child did not apply the parent's writes (a copy, a fork)
            if len(writes) > 1:
                found[channel] = f"it took {len(writes)} writes in step {step}"
            elif not _equal(values[channel], writes[0]):
                found[channel] = f"in step {step} its new value is not the value written"
    return found


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a value whose __eq__ fails is no proof of a reducer
        return True


def lineage_step(tup: CheckpointTuple | None) -> dict[str, str] | None:
    """Where a thread's first checkpoint was forked from, if it was."""
    if tup is None:
        return None
    forked = tup.metadata.get("forked_from")
    if isinstance(forked, Mapping) and forked.get("thread_id") and forked.get("checkpoint_id"):
        return {
            "thread_id": str(forked["thread_id"]),
            "checkpoint_id": str(forked["checkpoint_id"]),
        }
    return None
