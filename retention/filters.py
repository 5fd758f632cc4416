"""The shipped live-thread filters: each takes thread ids and returns the ones still live."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from retention.models import Park

__all__ = ["interrupts", "parks"]


def interrupts(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> set[str]:
    """Threads whose latest checkpoint holds a pending interrupt (a paused graph)."""
    if saver is None:
        from checkpoints.store.registry import get_saver

        saver = get_saver()
    return saver.interrupted([str(t) for t in thread_ids])


def parks(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> set[str]:
    """Threads with a park whose deadline has not passed at the sweep's ``now``."""
    now = now or utcnow()
    ids = list(thread_ids)
    return set(
        Park.objects.filter(thread_id__in=ids, deadline__gt=now).values_list("thread_id", flat=True)
    )
