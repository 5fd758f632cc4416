"""The shipped live-thread filters: each takes thread ids and returns the ones still live."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from checkpoints.savers.base import StoreSaver, utcnow
from retention.models import Park

# The channel a paused node's interrupt is written to. LangGraph 1.x made its constant
# private (importing it warns); the value is part of the stored format, so it is stable.
INTERRUPT = "__interrupt__"


def interrupts(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> set[str]:
    """Threads whose latest checkpoint holds a pending interrupt (a paused graph)."""
    if saver is None:
        from checkpoints.savers import get_saver

        saver = get_saver()
    ids = [str(t) for t in thread_ids]
    if getattr(saver, "supports_idle_sweep", False):
        return _orm_interrupts(saver, ids)
    live = set()
    for thread_id in ids:
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if latest is None:
            continue
        if any(channel == INTERRUPT for _task, channel, _value in latest.pending_writes or ()):
            live.add(thread_id)
    return live


def _orm_interrupts(saver: StoreSaver, ids: list[str]) -> set[str]:
    # One query finds the few threads holding any interrupt write; only those are checked
    # for whether it sits on their latest checkpoint, so a batch costs ~1 query, not ~N.
    from checkpoints.models import Checkpoint, PendingWrite

    db = saver.using
    written: dict[str, set[str]] = {}
    for thread_id, checkpoint_id in (
        PendingWrite.objects.using(db)
        .filter(thread__thread_id__in=ids, checkpoint_ns="", channel=INTERRUPT)
        .values_list("thread__thread_id", "checkpoint_id")
        .distinct()
    ):
        written.setdefault(thread_id, set()).add(checkpoint_id)
    live = set()
    for thread_id, checkpoint_ids in written.items():
        latest = (
            Checkpoint.objects.using(db)
            .filter(thread__thread_id=thread_id, checkpoint_ns="")
            .order_by("-checkpoint_id")
            .values_list("checkpoint_id", flat=True)
            .first()
        )
        if latest in checkpoint_ids:
            live.add(thread_id)
    return live


def parks(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> set[str]:
    """Threads with a park whose deadline has not passed at the sweep's ``now``."""
    now = now or utcnow()
    ids = list(thread_ids)
    return set(
        Park.objects.filter(thread_id__in=ids, deadline__gt=now).values_list("thread_id", flat=True)
    )
