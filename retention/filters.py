"""The shipped live-thread filters: each takes thread ids and answers the ones still live,
each with why in words (a filter may answer a plain set; a mapping adds the reasons)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import QuerySet
from django.utils.timesince import timesince

from checkpoints.channels import INTERRUPT
from checkpoints.errors import CheckpointStoreError
from checkpoints.status import Claim, asked, question_of, when
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.models import Park

__all__ = ["interrupts", "parks"]


def interrupts(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> dict[str, str]:
    """Threads whose latest checkpoint holds a pending interrupt (a paused graph): each
    with the question it asks and how long it has waited."""
    if saver is None:
        saver = get_saver()
    now = now or utcnow()
    live = saver.interrupted([str(t) for t in thread_ids])
    return {thread_id: interrupt_reason(saver, thread_id, now) for thread_id in sorted(live)}


def interrupt_reason(saver: StoreSaver, thread_id: str, now: datetime) -> str:
    """ "waiting on a human: “approve?”, asked 3 days ago (2026-12-01 …)" from the head."""
    try:
        head = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    except CheckpointStoreError as exc:
        return f"waiting on a human (its question could not be read: {exc})"
    question = ""
    for _task, channel, value in (head.pending_writes if head else None) or ():
        if channel == INTERRUPT:
            question = question_of(value)
            break
    words = f"waiting on a human: {asked(question)}"
    stamp = (head.checkpoint or {}).get("ts") if head else None
    try:
        at = datetime.fromisoformat(stamp) if stamp else None
    except (TypeError, ValueError):
        at = None
    if at is not None:
        words += f", asked {timesince(at, now)} ago ({when(at)})"
    return words


def live_parks(*, now: datetime) -> QuerySet:
    """Parks whose deadline has not passed at ``now`` (on any store, as the filter asks)."""
    return Park.objects.filter(deadline__gt=now)


def describe_park(park: Park) -> str:
    by = f" by {park.owner}" if park.owner else ""
    return f"parked{by} until {when(park.deadline)}"


def parks(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> dict[str, str]:
    """Threads with a park whose deadline has not passed at the sweep's ``now``."""
    ids = [str(t) for t in thread_ids]
    found: dict[str, str] = {}
    for park in live_parks(now=now or utcnow()).filter(thread_id__in=ids).order_by("deadline"):
        found.setdefault(park.thread_id, describe_park(park))
    return found


class ParkClaims:
    """Parks as the status rule's ``parked`` claims (registered by the app's ready())."""

    kind = "parked"

    def claims(self, *, provider: str, thread_ids: list[str], now: datetime) -> dict[str, Claim]:
        found: dict[str, Claim] = {}
        rows = live_parks(now=now).filter(thread_id__in=thread_ids).order_by("-deadline")
        for park in rows:
            # The latest deadline is how long the thread is kept.
            found.setdefault(park.thread_id, Claim("parked", describe_park(park), park.deadline))
        return found

    def claimed(self, *, provider: str, now: datetime) -> QuerySet:
        return live_parks(now=now)
