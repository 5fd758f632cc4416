"""The shapes a read accepts of a stored checkpoint body and its metadata."""

from __future__ import annotations

import json
from typing import Any

from checkpoints.errors import (
    UnreadableValue,
)
from checkpoints.store.planning.records import MISSING

# The body's fields a reader indexes into, with the types they must have when present.
_BODY_FIELDS = (
    ("channel_versions", dict),
    ("versions_seen", dict),
    ("pending_sends", (list, tuple)),
    ("updated_channels", (list, tuple, type(None))),
)


def body_shape(checkpoint: Any, versions: Any = MISSING) -> Any:
    """A decoded body once it has a checkpoint's shape, else UnreadableValue saying what
    is wrong (savers call it inside `decode_at`, which adds the place).

    ``versions``: the channel versions a store keeps beside the body (the ORM's column),
    set into it once checked. One type check per field: this runs on every read.
    """
    if type(checkpoint) is not dict:
        # The store service's saver holds a value as its bytes (`WireValue`): say what they
        # hold, as a saver that decodes them would.
        held = getattr(checkpoint, "held", None)
        shown = held() if callable(held) else checkpoint
        raise UnreadableValue(f"it is {_kind(shown)}, not a checkpoint (a dict)")
    if versions is not MISSING:
        checkpoint["channel_versions"] = {} if versions is None else versions
    for name, kind in _BODY_FIELDS:
        value = checkpoint.get(name, MISSING)
        if value is not MISSING and not isinstance(value, kind):
            raise UnreadableValue(f"its {name} is {_kind(value)}, not {_kind(kind)}")
    for node, seen in (checkpoint.get("versions_seen") or {}).items():
        if type(seen) is not dict:
            raise UnreadableValue(f"its versions_seen[{node!r}] is {_kind(seen)}, not a dict")
    return checkpoint


def metadata_shape(metadata: Any) -> dict[str, Any]:
    """Stored metadata (JSON text or already parsed) once it is an object, else
    UnreadableValue (savers call it inside `decode_at`, which adds the place)."""
    if isinstance(metadata, (str, bytes)):
        metadata = json.loads(metadata)
    if type(metadata) is not dict:
        raise UnreadableValue(f"it is {_kind(metadata)}, not metadata (an object)")
    return metadata


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, tuple) and all(isinstance(k, type) for k in value):
        return " or ".join(_kind(k) for k in value if k is not type(None))
    name = value.__name__ if isinstance(value, type) else type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
