"""Who may see which thread: owners their own, staff every one.

Ownership lives in the ORM ``Thread`` table, so it is known only when the deployment's
saver is an ORM saver (``postgres``/``sqlite``). On the ``redis`` and ``memory``
providers no owner is recorded, so only staff see or act on threads through the API; a
non-staff user sees an empty list and a 404 for every thread. Another owner's thread
answers 404 exactly like a missing one, so ids of other users' threads do not leak.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import OuterRef, QuerySet, Subquery

from checkpoints.errors import ThreadNotFound
from checkpoints.models import FinishedMark, Thread
from checkpoints.store.contract import StoreSaver


def is_orm(saver: StoreSaver) -> bool:
    """Whether the store keeps owners in the ORM's Thread table (the API filters on it)."""
    return saver.records_owners and saver.db_alias is not None


def thread_rows(saver: StoreSaver) -> QuerySet:
    """The saver's Thread rows, each annotated with its finished mark's due time."""
    marks = FinishedMark.objects.using(saver.db_alias).filter(thread_id=OuterRef("thread_id"))
    return (
        Thread.objects.using(saver.db_alias)
        .select_related("owner")
        .annotate(
            finished_due_at=Subquery(marks.values("due_at")[:1]),
            finished_marked_at=Subquery(marks.values("marked_at")[:1]),
        )
        .order_by("-last_write_at", "-pk")
    )


def visible_rows(user, saver: StoreSaver) -> QuerySet:
    rows = thread_rows(saver)
    return rows if user.is_staff else rows.filter(owner_id=user.pk)


def not_found(thread_id: str) -> ThreadNotFound:
    return ThreadNotFound(f"thread {thread_id!r} not found", field="thread_id")


@dataclass
class ThreadInfo:
    """What the API shows about one thread."""

    thread_id: str
    owner: Any = None
    created_at: datetime | None = None
    last_write_at: datetime | None = None
    version: int = 0
    waiting_minutes: int | None = None
    finished_minutes: int | None = None
    finished_marked_at: datetime | None = None
    finished_due_at: datetime | None = None
    # Read from the saver only for one thread's detail, never for a list.
    namespaces: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "finished" if self.finished_due_at is not None else "waiting"

    @property
    def owner_name(self) -> str:
        if self.owner is None:
            return ""
        return getattr(self.owner, get_user_model().USERNAME_FIELD, "") or ""

    @classmethod
    def from_row(cls, row: Thread) -> ThreadInfo:
        return cls(
            thread_id=row.thread_id,
            owner=row.owner,
            created_at=row.created_at,
            last_write_at=row.last_write_at,
            version=row.version,
            waiting_minutes=row.waiting_minutes,
            finished_minutes=row.finished_minutes,
            finished_marked_at=getattr(row, "finished_marked_at", None),
            finished_due_at=getattr(row, "finished_due_at", None),
        )

    @classmethod
    def from_saver(cls, saver: StoreSaver, thread_id: str) -> ThreadInfo:
        retention = saver.thread_retention(thread_id)
        mark = saver.finished_mark(thread_id)
        return cls(
            thread_id=thread_id,
            version=saver.thread_version(thread_id),
            waiting_minutes=retention.waiting_minutes,
            finished_minutes=retention.finished_minutes,
            finished_marked_at=mark.marked_at if mark else None,
            finished_due_at=mark.due_at if mark else None,
        )


def has_checkpoints(saver: StoreSaver, thread_id: str) -> bool:
    return (
        saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}) is not None
    )


def visible_thread(user, saver: StoreSaver, thread_id: str) -> ThreadInfo:
    """The thread when ``user`` may see it; ThreadNotFound otherwise (also for others')."""
    if is_orm(saver):
        row = visible_rows(user, saver).filter(thread_id=thread_id).first()
        if row is None:
            raise not_found(thread_id)
        return ThreadInfo.from_row(row)
    if not user.is_staff or not has_checkpoints(saver, thread_id):
        raise not_found(thread_id)
    return ThreadInfo.from_saver(saver, thread_id)


def find_owner(value: str) -> Any:
    """A user by primary key or username, or None."""
    users = get_user_model().objects.all()
    found = None
    if value.isdigit():
        found = users.filter(pk=int(value)).first()
    return found or users.filter(**{get_user_model().USERNAME_FIELD: value}).first()


def record_owner(saver: StoreSaver, thread_id: str, user) -> None:
    """Make ``user`` the owner of a thread the API just created (ORM stores only)."""
    saver.set_owner(thread_id, user.pk)
