"""The mark rules around a run: who marks a thread finished, who takes it out, and parks.

The code that minted a thread id owns it and marks it finished when its run ends without
a park; a run on a caller's thread takes it out of the finished set when it starts and
never marks it. A park keeps a thread waiting, so only stores every worker can read hold
one, and only with a deadline inside the thread's waiting horizon.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from checkpoints import audit
from checkpoints.conf import has_database
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.records import FinishedEntry
from retention.errors import ParkNotSupported, ParkRefused
from retention.policy import effective_retention

if TYPE_CHECKING:
    from retention.models import Park

# The models, and the selectors that read them, are imported in the functions that use
# them: a plain script imports this module (`thread_run`) before `from_conn_string` sets
# Django up, which models need.


def mark_finished(
    saver: StoreSaver, thread_id: str, owner: str = "", now: datetime | None = None
) -> FinishedEntry:
    """Mark the thread finished; it is due its finished retention in force now."""
    now = now or utcnow()
    _, finished = effective_retention(saver, thread_id)
    entry = saver.mark_finished(str(thread_id), now + timedelta(minutes=finished), owner or "")
    audit.record(
        "mark_finished",
        thread_id=str(thread_id),
        provider=saver.provider,
        detail={"due_at": entry.due_at.isoformat(), "owner": owner or ""},
    )
    return entry


def mark_owner(saver: StoreSaver, thread_id: str, user) -> str:
    """Whose finish mark it is when ``user`` marks the thread in the admin or the API: the
    thread's owner (a thread is finished by and for its owner), else, where the store
    records no owner, the user marking it. The audit trail names who acted either way."""
    from checkpoints.selectors import owner_name  # see the note at the top

    return owner_name(saver=saver, thread_id=str(thread_id)) or user.get_username()


def mark_finished_by(
    saver: StoreSaver, thread_id: str, user, now: datetime | None = None
) -> FinishedEntry:
    """`mark_finished` on ``user``'s request, the mark owned as `mark_owner` decides."""
    return mark_finished(saver, thread_id, owner=mark_owner(saver, thread_id, user), now=now)


def unmark_finished(saver: StoreSaver, thread_id: str) -> bool:
    """Take the thread out of the finished set; True when it was there."""
    removed = saver.unmark_finished(str(thread_id))
    if removed:
        audit.record("unmark_finished", thread_id=str(thread_id), provider=saver.provider)
    return removed


def park(
    saver: StoreSaver,
    thread_id: str,
    deadline: datetime | None,
    owner: str = "",
    now: datetime | None = None,
) -> Park:
    """Record a run waiting on an interrupt until ``deadline``; refuse before parking."""
    thread_id = str(thread_id)
    if not saver.can_park:
        raise ParkNotSupported(
            f"cannot park thread {thread_id!r} on the {saver.provider} store: only a store "
            "every worker shares (postgres, redis) can hold a parked run, which any worker "
            "must be able to resume",
            field="provider",
        )
    if deadline is None:
        raise ParkRefused(
            f"park of thread {thread_id!r} has no deadline; a park must end inside the "
            "thread's waiting horizon",
            field="deadline",
        )
    if not isinstance(deadline, datetime) or deadline.tzinfo is None:
        raise ParkRefused(
            f"park deadline for thread {thread_id!r} must be a timezone-aware datetime, "
            f"got {deadline!r}",
            field="deadline",
        )
    now = now or utcnow()
    waiting, _ = effective_retention(saver, thread_id)
    horizon = now + timedelta(minutes=waiting)
    if deadline <= now:
        raise ParkRefused(
            f"park deadline {deadline.isoformat()} for thread {thread_id!r} is not after "
            f"now ({now.isoformat()})",
            field="deadline",
        )
    if deadline > horizon:
        raise ParkRefused(
            f"park deadline {deadline.isoformat()} for thread {thread_id!r} is past its "
            f"waiting horizon {horizon.isoformat()} ({waiting} minutes from now)",
            field="deadline",
        )
    from retention.models import Park  # see the note at the top

    return Park.objects.create(
        thread_id=thread_id,
        deadline=deadline,
        created_at=now,
        owner=owner or "",
        provider=saver.provider,
    )


def park_presence(saver: StoreSaver, thread_id: str) -> str | None:
    """ "a park" when a park on this store names the thread (expired or not), else None: a
    fork or copy onto its id would take over a run's thread. Registered with
    `checkpoints.threads.register_presence_check` by the app's ready()."""
    # Parks exist only where a run can be parked, and they live in the Django database.
    if not saver.can_park or not has_database():
        return None
    from retention.models import Park  # see the note at the top

    found = Park.objects.filter(thread_id=str(thread_id), provider=saver.provider).exists()
    return "a park" if found else None


def has_live_park(saver: StoreSaver, thread_id: str, now: datetime | None = None) -> bool:
    """True when a park on this store holds the thread past ``now``."""
    from retention.models import Park  # see the note at the top

    return Park.objects.filter(
        thread_id=str(thread_id), provider=saver.provider, deadline__gt=now or utcnow()
    ).exists()


class ThreadRun:
    """One run on a thread; use with ``with`` or ``async with``.

    Yields itself: ``.thread_id``, ``.config`` for the graph, and ``.park(deadline)``
    (``await .apark(deadline)`` inside ``async with``).
    """

    def __init__(self, saver: StoreSaver, thread_id: str | None = None, *, owner: str = ""):
        self.saver = saver
        self.minted = thread_id is None
        self.thread_id = str(uuid.uuid4()) if thread_id is None else str(thread_id)
        self.owner = owner or ""
        self.parked: Park | None = None

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}}

    def park(self, deadline: datetime | None, now: datetime | None = None) -> Park:
        self.parked = park(self.saver, self.thread_id, deadline, owner=self.owner, now=now)
        return self.parked

    async def apark(self, deadline: datetime | None, now: datetime | None = None) -> Park:
        return await sync_to_async(self.park, thread_sensitive=True)(deadline, now)

    def _start(self) -> None:
        if not self.minted:
            unmark_finished(self.saver, self.thread_id)

    def _end(self) -> None:
        # Success or error alike: a minted thread nobody parked is done with. A park made
        # any way (run.park or retention.runs.park) counts while its deadline is ahead.
        if self.minted and not has_live_park(self.saver, self.thread_id):
            mark_finished(self.saver, self.thread_id, owner=self.owner)

    def __enter__(self) -> ThreadRun:
        self._start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._end()

    async def __aenter__(self) -> ThreadRun:
        await sync_to_async(self._start, thread_sensitive=True)()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await sync_to_async(self._end, thread_sensitive=True)()


def thread_run(saver: StoreSaver, thread_id: str | None = None, *, owner: str = "") -> ThreadRun:
    """The run rules around one run on ``thread_id``, or on a freshly minted thread."""
    return ThreadRun(saver, thread_id, owner=owner)
