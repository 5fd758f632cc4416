"""Who may see which thread: the API's names for the rules in `checkpoints.selectors`."""

from __future__ import annotations

from checkpoints.selectors import (
    ThreadInfo,
    find_user,
    not_found,
    owners_in_tables,
    thread_get,
    thread_rows,
    visible_rows,
)
from checkpoints.store.contract import StoreSaver

# The API's older names for the same rules.
find_owner = find_user
is_orm = owners_in_tables


def visible_thread(user, saver: StoreSaver, thread_id: str) -> ThreadInfo:
    """The thread when ``user`` may see it; ThreadNotFound otherwise (also for others')."""
    return thread_get(saver=saver, user=user, thread_id=thread_id)


__all__ = [
    "ThreadInfo",
    "find_owner",
    "is_orm",
    "not_found",
    "thread_rows",
    "visible_rows",
    "visible_thread",
]
