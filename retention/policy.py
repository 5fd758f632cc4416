"""A thread's two horizons: the platform's values, and the shorter ones a thread declares.

The platform's values are every thread's default and its ceiling. A declaration may only
shorten them; a longer value is refused naming both values, never shortened silently.

The horizon in force is retention's rule, written once as `ThreadRetention.in_force` beside
the store's records: the checkpoints app runs without retention installed (its Redis keys
still expire, its admin still shows when a thread goes idle), so the rule cannot live only
here. Retention asks it through `effective_retention` and `platform_retention`.
"""

from __future__ import annotations

from checkpoints import audit
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning.retention import ThreadRetention
from retention.errors import InvalidRetention, RetentionTooLong


def platform_retention() -> tuple[int, int]:
    """The deployment's (waiting, finished) minutes."""
    platform = ThreadRetention.platform()
    return platform.waiting_minutes, platform.finished_minutes


def _minutes(name: str, value: object) -> int | None:
    if value is None:
        return None
    # bool is an int subclass; True minutes is a bug, not a value.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRetention(
            f"{name} must be a whole number of minutes, got {value!r}", field=name
        )
    if value <= 0:
        raise InvalidRetention(f"{name} must be above zero, got {value}", field=name)
    return value


def validate_retention(
    *, waiting_minutes: int | None = None, finished_minutes: int | None = None
) -> ThreadRetention:
    """Check a declaration against the platform's ceilings and return it."""
    waiting = _minutes("waiting_minutes", waiting_minutes)
    finished = _minutes("finished_minutes", finished_minutes)
    platform_waiting, platform_finished = platform_retention()
    if waiting is not None and waiting > platform_waiting:
        raise RetentionTooLong(
            f"declared waiting retention {waiting} minutes is longer than the platform's "
            f"{platform_waiting} minutes; a thread may only shorten it",
            field="waiting_minutes",
        )
    if finished is not None and finished > platform_finished:
        raise RetentionTooLong(
            f"declared finished retention {finished} minutes is longer than the platform's "
            f"{platform_finished} minutes; a thread may only shorten it",
            field="finished_minutes",
        )
    if finished is not None and waiting is not None and finished > waiting:
        raise RetentionTooLong(
            f"declared finished retention {finished} minutes is longer than the declared "
            f"waiting retention {waiting} minutes",
            field="finished_minutes",
        )
    return ThreadRetention(waiting_minutes=waiting, finished_minutes=finished)


def declare_retention(
    saver: StoreSaver,
    thread_id: str,
    *,
    waiting_minutes: int | None = None,
    finished_minutes: int | None = None,
) -> ThreadRetention:
    """Record a thread's own (shorter) retention, replacing any earlier declaration."""
    retention = validate_retention(
        waiting_minutes=waiting_minutes, finished_minutes=finished_minutes
    )
    saver.set_thread_retention(str(thread_id), retention)
    audit.record(
        "declare_retention",
        thread_id=str(thread_id),
        provider=saver.provider,
        detail={
            "waiting_minutes": retention.waiting_minutes,
            "finished_minutes": retention.finished_minutes,
        },
    )
    return retention


def effective_retention(saver: StoreSaver, thread_id: str) -> tuple[int, int]:
    """The thread's (waiting, finished) minutes: its declaration over the platform's values.

    An unset finished is the platform's, capped at the thread's waiting.
    """
    in_force = saver.thread_retention(str(thread_id)).in_force()
    return in_force.waiting_minutes, in_force.finished_minutes
