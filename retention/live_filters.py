"""The live-thread filters the sweep asks before it deletes: their registry and the asking.

A filter takes thread ids and answers those still live (a set, or a mapping adding why in
words). Holds come first, then the LIVE_THREAD_FILTERS setting's dotted paths, then the
filters registered in code; the first one claiming a thread names it in the results.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from django.utils.module_loading import import_string

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, InvalidCheckpointInput
from checkpoints.store.contract import StoreSaver
from retention.errors import LiveFilterFailed
from retention.holds import HOLD_OWNER, held

LiveThreadFilter = Callable[..., Iterable[str]]
_registered: dict[str, LiveThreadFilter] = {}


def register_live_thread_filter(owner: str, func: LiveThreadFilter) -> None:
    """Ask ``func(thread_ids) -> set`` before every delete; ``owner`` names it in results."""
    if not isinstance(owner, str) or not owner.strip():
        raise InvalidCheckpointInput(
            f"a live-thread filter needs an owner name, got {owner!r}", field="owner"
        )
    if not callable(func):
        raise InvalidCheckpointInput(
            f"live-thread filter {owner!r} must be callable, got {func!r}", field="func"
        )
    _registered[owner] = func


def unregister_live_thread_filter(owner: str) -> None:
    """Stop asking the filter registered in code under ``owner``."""
    _registered.pop(owner, None)


def live_thread_filters() -> dict[str, LiveThreadFilter]:
    """Every filter the sweep asks: holds first (an operator's word, never configured away),
    then the configured dotted paths, then those registered in code."""
    found: dict[str, LiveThreadFilter] = {HOLD_OWNER: held}
    for owner, path in (setting("LIVE_THREAD_FILTERS") or {}).items():
        try:
            found[owner] = import_string(path)
        except ImportError as exc:
            raise CheckpointConfigError(
                f"live-thread filter {owner!r}: cannot import {path!r} ({exc})",
                field="LIVE_THREAD_FILTERS",
            ) from exc
    found.update(_registered)
    return found


def _call_filter(func: LiveThreadFilter, ids: list[str], **context: Any) -> Iterable[str]:
    # Filters see the sweep's own saver and clock when they accept them.
    params = inspect.signature(func).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    passed = {k: v for k, v in context.items() if takes_any or k in params}
    return func(list(ids), **passed)


def claimed_threads(
    ids: list[str], *, filters: dict[str, LiveThreadFilter], saver: StoreSaver, now: datetime
) -> dict[str, str]:
    """thread id -> the owner of the first filter claiming it; a failing filter raises."""
    found = claims_with_reasons(ids, filters=filters, saver=saver, now=now)
    return {thread_id: owner for thread_id, (owner, _) in found.items()}


def claims_with_reasons(
    ids: list[str], *, filters: dict[str, LiveThreadFilter], saver: StoreSaver, now: datetime
) -> dict[str, tuple[str, str]]:
    """thread id -> (owner, why in words) of the first filter claiming it; a filter that
    answers a plain set is reported as claiming it. A failing filter raises."""
    claims: dict[str, tuple[str, str]] = {}
    wanted = set(ids)
    for owner, func in filters.items():
        try:
            answer = _call_filter(func, ids, saver=saver, now=now)
            reasons = (
                {str(t): str(why) for t, why in answer.items()}
                if isinstance(answer, Mapping)
                else dict.fromkeys((str(t) for t in answer), "")
            )
        except Exception as exc:
            raise LiveFilterFailed(
                f"live-thread filter {owner!r} failed on a batch of {len(ids)} thread(s): "
                f"{type(exc).__name__}: {exc}",
                owner=owner,
            ) from exc
        for thread_id in reasons.keys() & wanted:
            why = reasons[thread_id] or f"live-thread filter {owner!r} claims it"
            claims.setdefault(thread_id, (owner, why))
    return claims
