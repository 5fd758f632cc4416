"""What a checkpoint changed against its parent: per channel, a readable diff of values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MISSING = object()


@dataclass(frozen=True)
class ChannelChange:
    """One channel's change between two checkpoints.

    ``kind`` is ``added`` (the parent had no value), ``removed`` (the child has none),
    ``list`` (items appended or removed), ``dict`` (keys added, removed or changed) or
    ``value`` (anything else replaced as a whole).
    """

    channel: str
    kind: str
    before: Any = None
    after: Any = None
    appended: list[Any] = field(default_factory=list)
    dropped: list[Any] = field(default_factory=list)
    added_keys: dict[str, Any] = field(default_factory=dict)
    removed_keys: dict[str, Any] = field(default_factory=dict)
    changed_keys: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        if self.kind == "added":
            return "new channel"
        if self.kind == "removed":
            return "value cleared"
        if self.kind == "list":
            parts = []
            if self.appended:
                parts.append(f"{len(self.appended)} item(s) added")
            if self.dropped:
                parts.append(f"{len(self.dropped)} item(s) removed")
            return ", ".join(parts) or "reordered"
        if self.kind == "dict":
            parts = []
            for label, keys in (
                ("added", self.added_keys),
                ("changed", self.changed_keys),
                ("removed", self.removed_keys),
            ):
                if keys:
                    parts.append(f"{len(keys)} key(s) {label}")
            return ", ".join(parts)
        return "value replaced"


def baseline(metadata: Mapping[str, Any] | None, parent_id: str | None) -> tuple[str | None, str]:
    """The checkpoint whose values a checkpoint's changes are measured against, and its role.

    A rollback's parent is its target, whose values it copies, so against the parent it
    always changed nothing; what a rollback changed is what the thread lost or regained,
    against the head it replaced (recorded in its ``rollback`` metadata).
    """
    rollback = (metadata or {}).get("rollback")
    if isinstance(rollback, Mapping) and rollback.get("replaced_head"):
        return str(rollback["replaced_head"]), "replaced head"
    return parent_id, "parent"


def channel_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ChannelChange]:
    """Every channel whose value differs between ``before`` and ``after``, sorted by name."""
    changes = []
    for channel in sorted(set(before) | set(after)):
        old = before.get(channel, MISSING)
        new = after.get(channel, MISSING)
        if old is not MISSING and new is not MISSING and _same(old, new):
            continue
        changes.append(value_change(channel, old, new))
    return changes


def value_change(channel: str, old: Any, new: Any) -> ChannelChange:
    """The change of one channel; ``old``/``new`` may be ``MISSING``."""
    if old is MISSING:
        return ChannelChange(channel, "added", after=new)
    if new is MISSING:
        return ChannelChange(channel, "removed", before=old)
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        return _list_change(channel, list(old), list(new))
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return _dict_change(channel, old, new)
    return ChannelChange(channel, "value", before=old, after=new)


def _list_change(channel: str, old: list[Any], new: list[Any]) -> ChannelChange:
    # Reducer channels (messages) mostly append: report the common prefix as unchanged,
    # then what the parent had after it as dropped and what the child has as appended.
    prefix = 0
    while prefix < min(len(old), len(new)) and _same(old[prefix], new[prefix]):
        prefix += 1
    return ChannelChange(
        channel, "list", before=old, after=new, appended=new[prefix:], dropped=old[prefix:]
    )


def _dict_change(channel: str, old: Mapping[Any, Any], new: Mapping[Any, Any]) -> ChannelChange:
    added = {str(k): new[k] for k in new if k not in old}
    removed = {str(k): old[k] for k in old if k not in new}
    changed = {str(k): (old[k], new[k]) for k in new if k in old and not _same(old[k], new[k])}
    return ChannelChange(
        channel,
        "dict",
        before=old,
        after=new,
        added_keys=added,
        removed_keys=removed,
        changed_keys=changed,
    )


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - a value whose __eq__ fails counts as changed
        return False
