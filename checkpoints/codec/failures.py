"""Decoding stored bytes with the place they came from named in every failure.

Savers call ``decode_at`` for each part of a checkpoint they read (its body, a channel's
value, a pending write), so a corrupt, tampered or blocked value surfaces as one specific
error naming thread, namespace, checkpoint and part, whatever went wrong underneath.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from checkpoints.errors import (
    CheckpointEncryptionError,
    UndecryptableValue,
    UnreadableValue,
    ValueTooLarge,
)

T = TypeVar("T")


def place(thread_id: str, ns: str, checkpoint_id: str, part: str) -> str:
    where = f"thread {thread_id!r}"
    if ns:
        where += f" namespace {ns!r}"
    return f"{part} of checkpoint {checkpoint_id!r} in {where}"


def decode_at(
    load: Callable[[], T],
    *,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    part: str | tuple[str, str] | Callable[[], str],
) -> T:
    """``load()``, or a failure naming where the bytes are stored.

    ``part``: its text, or (kind, name) or a function, made into text only for a failure
    (this runs for every value read, and most never fail).
    """
    try:
        return load()
    except (UnreadableValue, UndecryptableValue) as exc:
        part = part_text(part)
        if not exc.where:
            # A specific refusal from below (a blocked type): keep its class, add the place.
            exc.message = (
                f"cannot decode {place(thread_id, ns, checkpoint_id, part)}: {exc.message}"
            )
            exc.args = (exc.message,)
            exc.where = _where(thread_id, ns, checkpoint_id, part)
        raise
    except CheckpointEncryptionError as exc:
        part = part_text(part)
        raise UndecryptableValue(
            f"cannot decrypt {place(thread_id, ns, checkpoint_id, part)}: {exc.message}",
            field=part,
            where=_where(thread_id, ns, checkpoint_id, part),
        ) from exc
    except Exception as exc:  # noqa: BLE001 - every decoding failure becomes one error
        part = part_text(part)
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        raise UnreadableValue(
            f"cannot decode {place(thread_id, ns, checkpoint_id, part)}: {reason}",
            field=part,
            where=_where(thread_id, ns, checkpoint_id, part),
        ) from exc


def decode_writes(
    writes: Iterable[tuple[str, str, Callable[[], Any]]],
    *,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
) -> list[tuple[str, str, Any]]:
    """Pending writes ``(task_id, channel, load)`` decoded, each failure naming its write."""
    return [
        (
            task_id,
            channel,
            decode_at(
                load,
                thread_id=thread_id,
                ns=ns,
                checkpoint_id=checkpoint_id,
                part=lambda c=channel, t=task_id: f"pending write {c!r} of task {t!r}",
            ),
        )
        for task_id, channel, load in writes
    ]


def part_text(part: str | tuple[str, str] | Callable[[], str]) -> str:
    """Where a value is, as text: (kind, name) is ``kind 'name'``; a function is called."""
    if isinstance(part, tuple):
        return f"{part[0]} {part[1]!r}"
    return part() if callable(part) else part


def _where(thread_id: str, ns: str, checkpoint_id: str, part: str) -> dict[str, str]:
    return {
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "part": part,
    }


# -- write limits, given the limit (Django-free: the remote saver holds a put to the
# service's limits before sending it; `compression` applies them with the settings') -----
def limit_text(key: str, limit: int | None) -> str:
    """How a refusal names a limit: ``CHECKPOINTS['KEY'] (N bytes)``."""
    return f"CHECKPOINTS[{key!r}] ({limit} bytes)"


def refuse_value_over(size: int, where: Any, limit: int | None) -> None:
    """ValueTooLarge when one value's plain bytes are over ``limit`` (``CODEC_MAX_BYTES``).

    ``where``: the value's place as text, (kind, name) or a function (`part_text`), made
    into text only for a refusal.
    """
    if limit is not None and size > limit:
        text = part_text(where)
        raise ValueTooLarge(
            f"cannot store {text}: it is {size} bytes, over "
            f"{limit_text('CODEC_MAX_BYTES', limit)}, the most one value may hold",
            field=text,
            limit="CODEC_MAX_BYTES",
            size=size,
        )


def refuse_checkpoint_over(
    total: int,
    where: Any,
    at: tuple[str, str, str],
    limit: int | None,
    what: str = "this put's values",
) -> None:
    """ValueTooLarge when the plain bytes one write stores for checkpoint ``at`` (thread,
    namespace, id) come to more than ``limit`` (``MAX_CHECKPOINT_BYTES``); ``where`` is the
    value that took them over."""
    if limit is not None and total > limit:
        text = part_text(where)
        raise ValueTooLarge(
            f"cannot store {place(*at, text)}: with it {what} come to {total} bytes, over "
            f"{limit_text('MAX_CHECKPOINT_BYTES', limit)}, the most one checkpoint read may "
            "decompress",
            field=text,
            limit="MAX_CHECKPOINT_BYTES",
            size=total,
        )
