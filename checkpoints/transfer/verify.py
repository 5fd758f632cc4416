"""Reading a copied thread back and comparing it with its source."""

from __future__ import annotations

import json
from typing import Any

from checkpoints.errors import CheckpointStoreError
from checkpoints.transfer.records import ThreadRecord


class TransferVerifyError(CheckpointStoreError):
    """A thread read back from the target differs from its source."""

    code = "transfer_verify"


def _shape(thread: ThreadRecord | None, *, paths: bool) -> list:
    if thread is None:
        return []
    out = []
    for cp in thread.checkpoints:
        body = dict(cp.checkpoint)
        values = body.pop("channel_values", {}) or {}
        out.append(
            (
                cp.ns,
                cp.checkpoint_id,
                cp.parent_id,
                json.loads(json.dumps(cp.metadata, default=str)),
                json.loads(json.dumps({k: body.get(k) for k in ("v", "ts", "channel_versions")})),
                json.loads(json.dumps(body.get("versions_seen"), default=str)),
                values,
                [(w.task_id, w.task_path if paths else "", w.channel, w.value) for w in cp.writes],
            )
        )
    return out


def verify_thread(source: ThreadRecord | None, target: ThreadRecord | None) -> None:
    """Raise TransferVerifyError naming the first checkpoint that differs."""
    name = (source or target).thread_id if (source or target) else "?"
    paths = source is not None and target is not None
    a, b = _shape(source, paths=paths), _shape(target, paths=paths)
    if len(a) != len(b):
        raise TransferVerifyError(
            f"thread {name!r}: the source holds {len(a)} checkpoint(s), the target {len(b)}"
        )
    parts = ("ns", "id", "parent", "metadata", "versions", "versions_seen", "values", "writes")
    for left, right in zip(a, b, strict=True):
        for part, x, y in zip(parts, left, right, strict=True):
            if x != y:
                raise TransferVerifyError(
                    f"thread {name!r}: checkpoint {left[1]!r} (ns {left[0]!r}) differs in its "
                    f"{part}: source {_short(x)}, target {_short(y)}"
                )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
