"""Pure rules of the store, with no I/O: every saver reads and writes its own storage, then
asks these what a write, prune, copy or delete means, so each rule is written once.

This module holds what every operation's plan shares: the keys a config names, the
thread-id and key rules, and the store's clock. Each operation has its own module: `put`,
`writes`, `prune`, `delete`, `copy`, `format` (the format-generation verdict), `metadata`
(metadata as JSON, filters), `reads` (the shapes a read refuses), `parent_sends`
(checkpoints before format v4), `records` (what the ledgers hand out), `retention` (a
thread's declared retention).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig

from checkpoints.errors import InvalidCheckpointInput

# Every provider's key index can hold this much; a longer thread id is refused up front.
MAX_THREAD_ID_BYTES = 1024


def utcnow() -> datetime:
    return datetime.now(UTC)


def config_keys(config: RunnableConfig | None, *, need_checkpoint: bool = False):
    """(thread_id, checkpoint_ns, checkpoint_id) from a config, refusing a bad one clearly."""
    if type(config) is dict and type(config.get("configurable")) is dict:
        pass  # the usual case, without the abstract-class checks below
    elif not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise InvalidCheckpointInput(
            "config must be a dict with a 'configurable' dict holding 'thread_id'",
            field="config",
        )
    conf = config["configurable"]
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidCheckpointInput(
            "config['configurable']['thread_id'] is required", field="thread_id"
        )
    thread_id = check_thread_id(thread_id)
    ns = conf.get("checkpoint_ns") or ""
    checkpoint_id = conf.get("checkpoint_id") or None
    if need_checkpoint and not checkpoint_id:
        raise InvalidCheckpointInput(
            "config['configurable']['checkpoint_id'] is required for this call",
            field="checkpoint_id",
        )
    return (
        thread_id,
        check_key(ns, "checkpoint_ns") if ns else "",
        check_key(checkpoint_id, "checkpoint_id") if checkpoint_id else None,
    )


def list_bounds(
    config: RunnableConfig | None, before: RunnableConfig | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """(thread_id, checkpoint_ns, checkpoint_id, before's checkpoint id) of a list call,
    each checked as a key; None where the call names none (no namespace: every one)."""
    thread_id = ns = checkpoint_id = before_id = None
    if config is not None:
        thread_id, _, checkpoint_id = config_keys(config)
        ns = config["configurable"].get("checkpoint_ns")
        if ns is not None:
            ns = check_key(ns, "checkpoint_ns")
    if before is not None:
        before_id = (before.get("configurable") or {}).get("checkpoint_id")
        if before_id is not None:
            before_id = check_key(before_id, "before")
    return thread_id, ns, checkpoint_id, before_id


def check_key(value: Any, field: str) -> str:
    """``value`` as text every store can key by (no NUL, no lone surrogate), or
    InvalidCheckpointInput naming ``field``."""
    value = str(value)
    if "\x00" in value:
        raise InvalidCheckpointInput(f"{field} must not contain NUL characters", field=field)
    if not value.isascii():
        _utf8_size(value, field)
    return value


def _utf8_size(text: str, field: str) -> int:
    # A lone surrogate ("\ud800") is a str but no UTF-8: every store would fail on it.
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidCheckpointInput(
            f"{field} holds a lone surrogate {text[exc.start]!r}, which is not UTF-8: "
            "no store can keep it",
            field=field,
        ) from None


def check_thread_id(thread_id: Any, *, field: str = "thread_id") -> str:
    """A thread id as the store keeps it, or InvalidCheckpointInput naming ``field``.

    The one thread-id rule: the store, the API and every entrance apply this function.
    """
    thread_id = str(thread_id)
    if not thread_id:
        raise InvalidCheckpointInput(f"{field} must not be empty", field=field)
    if "\x00" in thread_id:
        raise InvalidCheckpointInput(f"{field} must not contain NUL characters", field=field)
    if thread_id.isascii():
        size = len(thread_id)
    else:
        size = _utf8_size(thread_id, field)
    if size > MAX_THREAD_ID_BYTES:
        raise InvalidCheckpointInput(
            f"{field} is {size} bytes long; the store takes at most {MAX_THREAD_ID_BYTES} "
            "bytes of UTF-8",
            field=field,
        )
    return thread_id


def check_limit(limit: Any) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidCheckpointInput(f"limit must be a whole number >= 0, got {limit!r}")


def stored_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


# metadata["step"] is kept in a 32-bit column (PostgreSQL's integer); every store refuses
# what one could not keep.
STEP_MIN, STEP_MAX = -(2**31), 2**31 - 1


def check_step(step: Any, field: str) -> None:
    """Refuse an int step no store could keep (a stored step, or one a filter compares with
    the step column: past 64 bits SQLite's driver overflows instead of matching nothing)."""
    if type(step) is int and not STEP_MIN <= step <= STEP_MAX:
        raise InvalidCheckpointInput(
            f"{field} {step} is outside the 32-bit range a step is stored in "
            f"({STEP_MIN} to {STEP_MAX})",
            field=field,
        )
