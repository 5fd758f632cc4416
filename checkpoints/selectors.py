"""How entrances read the store: thread lists, one thread, history, finished marks.

The API (and any other entrance) reads threads through these functions, never through the
saver's tables: who may see a thread, the finished-mark annotation and the pagination
rule (ids first, details only for the page shown) are written here once.

Ownership is known only where the store records owners (`records_owners`, the ORM
providers). Elsewhere only staff see threads; a non-staff user sees an empty list and a
404 for every thread. Another owner's thread answers exactly like a missing one, so ids of
other users' threads do not leak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from checkpoints.errors import ThreadNotFound
from checkpoints.models import FinishedMark, Thread
from checkpoints.status import written_since
from checkpoints.store.contract import StoreSaver
from checkpoints.store.orm.ledger import find_user


@dataclass
class ThreadInfo:
    """What an entrance shows about one thread."""

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
    def written_since_finished(self) -> bool:
        """Finished, written since (the sweep's run rule spares it)."""
        return self.finished_due_at is not None and written_since(
            self.finished_marked_at, self.last_write_at
        )

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
            last_write_at=saver.last_writes([thread_id]).get(thread_id),
            version=saver.thread_version(thread_id),
            waiting_minutes=retention.waiting_minutes,
            finished_minutes=retention.finished_minutes,
            finished_marked_at=mark.marked_at if mark else None,
            finished_due_at=mark.due_at if mark else None,
        )


def owners_in_tables(saver: StoreSaver) -> bool:
    """Whether the store keeps its threads and their owners in the ORM's tables."""
    return saver.records_owners and saver.db_alias is not None


def thread_rows(saver: StoreSaver) -> QuerySet:
    """The store's Thread rows, newest write first, annotated with their finished mark."""
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


class Page(Sequence):
    """Items read lazily: the paginator slices ids, only the page's details are read.

    For table rows (``rows_for`` given) the slice reads bare primary keys in index order
    and only the page's rows are read with their annotations, so a deep page costs an
    index walk, not a finished-mark lookup for every skipped row.
    """

    def __init__(
        self,
        items: Sequence[Any],
        detail: Callable[[Any], ThreadInfo],
        rows_for: Callable[[list[int]], QuerySet] | None = None,
    ) -> None:
        self.items = items
        self.detail = detail
        self.rows_for = rows_for

    def __len__(self) -> int:
        return self.items.count() if isinstance(self.items, QuerySet) else len(self.items)

    def __getitem__(self, index):
        if isinstance(index, slice):
            if self.rows_for is not None:
                pks = list(self.items.values_list("pk", flat=True)[index])
                rows = {row.pk: row for row in self.rows_for(pks)}
                return [self.detail(rows[pk]) for pk in pks if pk in rows]
            return [self.detail(item) for item in self.items[index]]
        return self.detail(self.items[index])


def unindexed(field: str) -> Coalesce:
    """``field`` as an expression no index holds, to order a filter's few rows by.

    Ordered by the field itself, PostgreSQL walks its index and tests the filter on every
    row it passes, expecting the matches spread evenly; finished threads are few and old,
    so nearly every thread is read first (110-250 ms at 100,000). Ordered by this, it finds
    the matching rows first and sorts only those.
    """
    return Coalesce(field, field)


def thread_list(
    *, saver: StoreSaver, user, owner: str | None = None, status: str | None = None
) -> Page:
    """The threads ``user`` may see, newest write first, as a lazily read page source.

    ``owner`` (a user id or username) narrows to that owner's threads; ``status`` to
    ``"waiting"`` or ``"finished"`` ones.
    """
    if owners_in_tables(saver):
        ids = Thread.objects.using(saver.db_alias).order_by("-last_write_at", "-pk")
        if not user.is_staff:
            ids = ids.filter(owner_id=user.pk)
        if owner is not None:
            found = find_user(owner)
            ids = ids.filter(owner=found) if found else ids.none()
        marked = Exists(
            FinishedMark.objects.using(saver.db_alias).filter(thread_id=OuterRef("thread_id"))
        )
        if status == "finished":
            # Finished threads are few (the finished horizon is the short one) and old, so
            # walking the write-order index and probing the marks for each thread reads
            # nearly every thread before the first page is full (the planner assumes the
            # marked ones are spread evenly). Ordering by an expression no index holds makes
            # it join the marks first and sort only the marked threads.
            ids = ids.filter(marked).order_by(unindexed("last_write_at").desc(), "-pk")
        elif status == "waiting":
            ids = ids.filter(~marked)
        return Page(ids, ThreadInfo.from_row, lambda pks: thread_rows(saver).filter(pk__in=pks))
    if not user.is_staff or owner is not None:
        return Page([], ThreadInfo.from_row)
    ids = saver.threads()
    if status is None:
        return Page(ids, lambda thread_id: ThreadInfo.from_saver(saver, thread_id))
    # The status lives in the finished-marks ledger: read each thread's details to filter.
    infos = [ThreadInfo.from_saver(saver, t) for t in ids]
    return Page([i for i in infos if i.status == status], lambda info: info)


def not_found(thread_id: str) -> ThreadNotFound:
    return ThreadNotFound(f"thread {thread_id!r} not found", field="thread_id")


def thread_get(*, saver: StoreSaver, user, thread_id: str) -> ThreadInfo:
    """The thread when ``user`` may see it; ThreadNotFound otherwise (also for others')."""
    if owners_in_tables(saver):
        row = visible_rows(user, saver).filter(thread_id=thread_id).first()
        if row is None:
            raise not_found(thread_id)
        return ThreadInfo.from_row(row)
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if not user.is_staff or saver.get_tuple(root) is None:
        raise not_found(thread_id)
    return ThreadInfo.from_saver(saver, thread_id)


def history(
    *,
    saver: StoreSaver,
    thread_id: str,
    limit: int | None,
    before: str | None = None,
    source: str | None = None,
    metadata: dict[str, Any] | None = None,
    checkpoint_ns: str = "",
) -> Iterator[Any]:
    """The thread's snapshots newest first; the metadata filter reaches the store as data."""
    from checkpoints.graphs import time_travel_for

    return time_travel_for(saver, thread_id).get_state_history(
        thread_id,
        limit=limit,
        before=before,
        source=source,
        filter=metadata or None,
        checkpoint_ns=checkpoint_ns,
    )
