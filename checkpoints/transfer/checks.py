"""What every thread of an import must be before anything of it is written.

The rules are the store's and the API's own, applied to each record whatever its source
(an export file, LangGraph's tables, a saver): ids and keys by `check_thread_id` and
`check_key` (no NUL, no lone surrogate), a declared retention by retention's
`validate_retention` (the bounds the API enforces), and each checkpoint the shape
LangGraph gives it. A thread that fails is refused whole, named with its file line or its
thread and checkpoint ids; the store never sees it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.planning import check_key, check_thread_id
from checkpoints.transfer.extras import check_extras
from checkpoints.transfer.records import (
    CheckpointRecord,
    ThreadRecord,
    TransferFormatError,
    refuse,
)

# Pending-write indexes are 32-bit in every store (LangGraph's specials are -1 to -4).
IDX_RANGE = (-(2**31), 2**31 - 1)
RETENTION_KEYS = {"waiting_minutes", "finished_minutes"}


class _Bad(Exception):
    """Internal: what is wrong, and in which checkpoint."""

    def __init__(self, why: str, checkpoint: CheckpointRecord | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.checkpoint = checkpoint


def check_thread(thread: ThreadRecord) -> TransferFormatError | None:
    """The refusal of ``thread`` naming its first fault, or None when it may be written."""
    try:
        _thread(thread)
    except _Bad as bad:
        cp = bad.checkpoint
        line = cp.line if cp is not None and cp.line is not None else thread.line
        return refuse(
            bad.why,
            thread_id=thread.thread_id,
            path=thread.path,
            line=line,
            checkpoint=None if cp is None else (_show(cp.ns), _show(cp.checkpoint.get("id"))),
        )
    return None


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _thread(thread: ThreadRecord) -> None:
    _key(thread.thread_id, "its thread id", check_thread_id)
    if not isinstance(thread.owner, str):
        raise _Bad(f"its owner is a {type(thread.owner).__name__}, not a username")
    if thread.owner:
        _key(thread.owner, "its owner")
    _retention(thread.retention)
    _finished(thread.finished)
    why = check_extras(thread.extras)
    if why is not None:
        raise _Bad(why)
    seen: set[tuple[str, str]] = set()
    for cp in thread.checkpoints:
        try:
            _checkpoint(cp)
        except _Bad as bad:
            raise _Bad(bad.why, cp) from None
        at = (cp.ns, cp.checkpoint["id"])
        if at in seen:
            raise _Bad("the thread holds this checkpoint a second time", cp)
        seen.add(at)


def _key(value: Any, what: str, check=None) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{what} is a {type(value).__name__}, not text")
    try:
        if check is not None:
            return check(value, field=what)
        return check_key(value, what)
    except CheckpointStoreError as exc:
        raise _Bad(exc.message) from None


def _retention(retention: Any) -> None:
    if retention is None:
        return
    if type(retention) is not dict:
        raise _Bad(f"its retention is a {type(retention).__name__}, not an object")
    unknown = set(retention) - RETENTION_KEYS
    if unknown:
        raise _Bad(
            f"its retention names {', '.join(sorted(map(repr, unknown)))}; it holds only "
            "waiting_minutes and finished_minutes"
        )
    # At call time: the retention app builds on this one, and an import record's retention
    # is checked by its rule (the API's bounds) only when a record declares one.
    from retention.policy import validate_retention

    try:
        validate_retention(**retention)
    except CheckpointStoreError as exc:
        raise _Bad(f"its retention is refused: {exc.message}") from None


def _finished(finished: Any) -> None:
    if finished is None:
        return
    if type(finished) is not dict or set(finished) - {"due_at", "owner"}:
        raise _Bad(f"its finished mark is {_brief(finished)}, not an object of due_at and owner")
    due = finished.get("due_at")
    try:
        when = datetime.fromisoformat(due) if isinstance(due, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise _Bad(f"its finished mark's due_at {_brief(due)} is not an ISO time with a zone")
    try:
        when.astimezone(UTC)  # as the store keeps it
    except OverflowError:
        raise _Bad(
            f"its finished mark's due_at {_brief(due)} is outside the years 1-9999 in UTC"
        ) from None
    if not isinstance(finished.get("owner", ""), str):
        raise _Bad("its finished mark's owner is not text")


def _checkpoint(cp: CheckpointRecord) -> None:
    body = cp.checkpoint
    _key(cp.ns, "its checkpoint_ns")
    if not body.get("id"):
        raise _Bad("it has no checkpoint id")
    _key(body["id"], "its checkpoint_id")
    if cp.parent_id is not None:
        _key(cp.parent_id, "its parent checkpoint id")
    version = body.get("v")
    if type(version) is not int:
        raise _Bad(f"its format version 'v' is {_brief(version)}, not a whole number")
    ts = body.get("ts")
    try:
        iso = isinstance(ts, str) and datetime.fromisoformat(ts) is not None
    except ValueError:
        iso = False
    if not iso:
        raise _Bad(f"its 'ts' {_brief(ts)} is not an ISO time")
    versions = body.get("channel_versions")
    if type(versions) is not dict:
        raise _Bad(f"its channel_versions is {_brief(versions)}, not an object")
    for channel, value in versions.items():
        _key(channel, "a channel name in its channel_versions")
        _version(value, f"the version of channel {channel!r}")
    seen = body.get("versions_seen", {})
    if type(seen) is not dict:
        raise _Bad(f"its versions_seen is {_brief(seen)}, not an object")
    for node, by_channel in seen.items():
        _key(node, "a node name in its versions_seen")
        if type(by_channel) is not dict:
            raise _Bad(f"its versions_seen of {node!r} is {_brief(by_channel)}, not an object")
        for channel, value in by_channel.items():
            _key(channel, f"a channel name in its versions_seen of {node!r}")
            _version(value, f"the version node {node!r} saw of channel {channel!r}")
    updated = body.get("updated_channels")
    if updated is not None and (
        type(updated) is not list or not all(isinstance(c, str) for c in updated)
    ):
        raise _Bad(f"its updated_channels is {_brief(updated)}, not a list of channel names")
    values = body.get("channel_values", {})
    if type(values) is not dict:
        raise _Bad(f"its channel_values is {_brief(values)}, not an object")
    for channel in values:
        _key(channel, "a channel name in its values")
    _metadata(cp.metadata)
    for i, write in enumerate(cp.writes):
        where = f"its pending write {i}"
        _key(write.task_id, f"{where}'s task_id")
        if not write.task_id:
            raise _Bad(f"{where} has an empty task_id")
        _key(write.task_path, f"{where}'s task_path")
        _key(write.channel, f"{where}'s channel")
        if write.idx is not None and (
            type(write.idx) is not int or not IDX_RANGE[0] <= write.idx <= IDX_RANGE[1]
        ):
            raise _Bad(f"{where}'s idx {_brief(write.idx)} is not a 32-bit whole number")


def _version(value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Bad(f"{what} is {_brief(value)}, not text or a number")
    if isinstance(value, str):
        _key(value, what)


def _metadata(metadata: Any) -> None:
    if type(metadata) is not dict:
        raise _Bad(f"its metadata is {_brief(metadata)}, not an object")
    step = metadata.get("step")
    if step is not None and type(step) is not int:
        raise _Bad(f"its metadata's step is {_brief(step)}, not a whole number")
    source = metadata.get("source")
    if source is not None and not isinstance(source, str):
        raise _Bad(f"its metadata's source is {_brief(source)}, not text")
    parents = metadata.get("parents")
    if parents is not None and (
        type(parents) is not dict
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in parents.items())
    ):
        raise _Bad(f"its metadata's parents is {_brief(parents)}, not an object of ids")
    _json_text(metadata, "its metadata")


def _json_text(value: Any, where: str, depth: int = 0) -> None:
    """Every key and string of ``value`` is text a store can keep (no lone surrogate)."""
    if depth > 200:
        raise _Bad(f"{where} nests deeper than 200 levels")
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _Bad(
                    f"{where} holds a lone surrogate {value[exc.start]!r}, which is not UTF-8"
                ) from None
    elif type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Bad(f"{where} has a key that is not text: {_brief(key)}")
            _json_text(key, where, depth + 1)
            _json_text(item, f"{where}[{key!r}]", depth + 1)
    elif type(value) is list:
        for item in value:
            _json_text(item, where, depth + 1)
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise _Bad(f"{where} holds a {type(value).__name__}, which JSON cannot keep")


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."
