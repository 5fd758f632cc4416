"""Decoding stored bytes with the place they came from named in every failure.

Savers call ``decode_at`` for each part of a checkpoint they read (its body, a channel's
value, a pending write), so a corrupt, tampered or blocked value surfaces as one specific
error naming thread, namespace, checkpoint and part, whatever went wrong underneath.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from checkpoints.errors import (
    CheckpointEncryptionError,
    UndecryptableValue,
    UnreadableValue,
)

T = TypeVar("T")


def place(thread_id: str, ns: str, checkpoint_id: str, part: str) -> str:
    where = f"thread {thread_id!r}"
    if ns:
        where += f" namespace {ns!r}"
    return f"{part} of checkpoint {checkpoint_id!r} in {where}"


def decode_at(
    load: Callable[[], T], *, thread_id: str, ns: str, checkpoint_id: str, part: str
) -> T:
    """``load()``, or a failure naming where the bytes are stored."""
    try:
        return load()
    except (UnreadableValue, UndecryptableValue):
        raise
    except CheckpointEncryptionError as exc:
        raise UndecryptableValue(
            f"cannot decrypt {place(thread_id, ns, checkpoint_id, part)}: {exc.message}",
            field=part,
            where=_where(thread_id, ns, checkpoint_id, part),
        ) from exc
    except Exception as exc:  # noqa: BLE001 - every decoding failure becomes one error
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        raise UnreadableValue(
            f"cannot decode {place(thread_id, ns, checkpoint_id, part)}: {reason}",
            field=part,
            where=_where(thread_id, ns, checkpoint_id, part),
        ) from exc


def _where(thread_id: str, ns: str, checkpoint_id: str, part: str) -> dict[str, str]:
    return {
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "part": part,
    }
