"""How entrances read the store: thread lists, one thread, history, finished marks.

The API, the admin (and any other entrance) read threads through these functions, never
through the saver's tables: who may see a thread, the finished-mark annotation and the
pagination rule (ids first, details only for the page shown) are written here once, and so
is each read the admin's pages make of the ORM tables (checkpoint rows, lineage, writes).

Ownership is known only where the store records owners (`records_owners`, the ORM
providers). Elsewhere only staff see threads; a non-staff user sees an empty list and a
404 for every thread. Another owner's thread answers exactly like a missing one, so ids of
other users' threads do not leak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.db.models import (
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce, Length

from checkpoints.errors import ThreadNotFound
from checkpoints.models import ChannelBlob, Checkpoint, FinishedMark, PendingWrite, Thread
from checkpoints.store.contract import StoreSaver
from checkpoints.store.orm.ledger import find_user

# How many children (or forks) of one checkpoint a page links to.
CHILD_LINKS = 20


def written_since(marked_at: datetime | None, last_write_at: datetime | None) -> bool:
    """The run rule: a thread marked finished and written after the mark."""
    return marked_at is not None and last_write_at is not None and last_write_at > marked_at


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
    # What the status rule reads (checkpoints.status): the head's writes, the claims on the
    # thread (holds, parks), what the head asks or the error it holds, whether the store
    # sweeps idle threads.
    has_interrupt: bool = False
    has_resume: bool = False
    has_error: bool = False
    claims: dict[str, Any] = field(default_factory=dict)
    question: str = ""
    error: str = ""
    idle_swept: bool = True

    @property
    def state(self) -> str:
        """ "finished" when marked finished, else "waiting" (the finished-marks ledger)."""
        return "finished" if self.finished_due_at is not None else "waiting"

    @cached_property
    def status(self):
        """The status rule's verdict (`checkpoints.status.thread_status`) at this moment."""
        from checkpoints.status import thread_status
        from checkpoints.store.planning import ThreadRetention, utcnow

        return thread_status(
            now=utcnow(),
            last_write_at=self.last_write_at,
            waiting_minutes=ThreadRetention(self.waiting_minutes).in_force().waiting_minutes,
            mark_due=self.finished_due_at,
            marked_at=self.finished_marked_at,
            claims=self.claims,
            interrupted=self.has_interrupt and not self.has_resume,
            interrupt_written=self.has_interrupt,
            question=self.question,
            error=self.error or ("the last task failed" if self.has_error else ""),
            idle_swept=self.idle_swept,
        )

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
            has_interrupt=bool(getattr(row, "has_interrupt", False)),
            has_resume=bool(getattr(row, "has_resume", False)),
            has_error=bool(getattr(row, "has_error", False)),
        )

    @classmethod
    def from_saver(cls, saver: StoreSaver, thread_id: str) -> ThreadInfo:
        from checkpoints.channels import ERROR, INTERRUPT, RESUME
        from checkpoints.errors import CheckpointCodecError, CheckpointEncryptionError
        from checkpoints.store.projection import values_unread

        retention = saver.thread_retention(thread_id)
        mark = saver.finished_mark(thread_id)
        unreadable = ""
        try:
            # Only the head's writes are wanted: its values stay undecoded (a list reads
            # every thread's head; one thread's unreadable bytes must not fail the list).
            with values_unread():
                head = saver.get_tuple(
                    {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                )
        except (CheckpointCodecError, CheckpointEncryptionError) as exc:
            head, unreadable = None, exc.message
        channels = {channel for _task, channel, _value in (head.pending_writes if head else ())}
        return cls(
            has_interrupt=INTERRUPT in channels,
            has_resume=RESUME in channels,
            has_error=ERROR in channels or bool(unreadable),
            error=unreadable,
            idle_swept=saver.supports_idle_sweep,
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


# -- the finished mark: one annotation, one condition ------------------------------------
def with_finished_mark(rows: QuerySet) -> QuerySet:
    """Thread rows annotated with their finished mark: ``finished_due_at``,
    ``finished_marked_at`` and ``finished_owner`` (None where the thread is not marked)."""
    marks = FinishedMark.objects.filter(thread_id=OuterRef("thread_id"))
    return rows.annotate(
        finished_due_at=Subquery(marks.values("due_at")[:1]),
        finished_marked_at=Subquery(marks.values("marked_at")[:1]),
        finished_owner=Subquery(marks.values("owner")[:1]),
    )


def is_marked() -> Exists:
    """The condition on Thread rows "marked finished": the API's and the admin's finished."""
    return Exists(FinishedMark.objects.filter(thread_id=OuterRef("thread_id")))


def thread_rows(saver: StoreSaver) -> QuerySet:
    """The store's Thread rows, newest write first, annotated with what the status rule
    reads (their finished mark, their head's writes)."""
    from checkpoints.status import with_status_facts

    rows = Thread.objects.using(saver.db_alias).select_related("owner")
    return with_status_facts(rows).order_by("-last_write_at", "-pk")


def visible_rows(user, saver: StoreSaver) -> QuerySet:
    rows = thread_rows(saver)
    return rows if user.is_staff else rows.filter(owner_id=user.pk)


@contextmanager
def without_jit(alias: str):
    """PostgreSQL only: JIT off for this block's statements (SET LOCAL, so a pooler in
    transaction mode sees it end with the transaction)."""
    if connections[alias].vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=alias), connections[alias].cursor() as cur:
        cur.execute("SET LOCAL jit = off")
        yield


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
        provider: str = "",
        costly: bool = False,
    ) -> None:
        self.items = items
        self.detail = detail
        self.rows_for = rows_for
        # Whether each row costs the condition much to be told apart (a status filter): a
        # deep page then reads its count with it, instead of walking the rows twice.
        self.costly = costly
        # The store whose holds and parks the page's threads are shown with.
        self.provider = provider
        # What `read_window` read: the count, and (start, stop, primary keys) of a page.
        self._count: int | None = None
        self._window: tuple[int, int, list] | None = None

    def __len__(self) -> int:
        if self._count is not None:
            return self._count
        if not isinstance(self.items, QuerySet):
            return len(self.items)
        # Bare ids in no order: the count computes none of the rows' annotations, and JIT
        # compiling a status filter's plan cost more than running it (1-3 s at 100,000
        # threads), as on the admin's lists.
        with without_jit(self.items.db):
            self._count = self.items.order_by().values("pk").count()
        return self._count

    def read_window(self, offset: int, limit: int) -> None:
        """Read the page at ``offset`` and the whole list's count in one statement, where
        that spares a pass over the list: it is sorted whole anyway (ordered by an
        expression no index holds: the few, old kinds), or the page is deep (walking
        ``offset`` rows in order costs what counting them does). A status filter at
        100,000 threads paid both passes: idle's last page 112 ms, finished's 81. A cheap
        condition's deep page is counted apart and walked from the nearer end instead
        (sorting 89,000 unmarked threads to count them cost 106 ms against 90)."""
        if self.rows_for is None or not isinstance(self.items, QuerySet):
            return
        if not (sorted_whole(self.items) or (self.costly and offset >= DEEP_OFFSET)):
            return
        found = keys_with_count(self.items, offset, offset + limit)
        if found is not None:
            self._count, pks = found
            self._window = (offset, offset + limit, pks)

    def __getitem__(self, index):
        if isinstance(index, slice):
            if self.rows_for is not None:
                if self._window is not None and self._window[:2] == (index.start, index.stop):
                    pks = self._window[2]
                else:
                    pks = self._keys(index)
                rows = {row.pk: row for row in self.rows_for(pks)}
                return with_claims(
                    [self.detail(rows[pk]) for pk in pks if pk in rows], self.provider
                )
            return with_claims([self.detail(item) for item in self.items[index]], self.provider)
        return with_claims([self.detail(self.items[index])], self.provider)[0]

    def _keys(self, index: slice) -> list:
        """The slice's primary keys (`keys_from_nearer_end`)."""
        with without_jit(self.items.db):
            if index.stop is None:
                return list(self.items.values_list("pk", flat=True)[index])
            return keys_from_nearer_end(self.items, index.start or 0, index.stop, len(self))


# Past this many rows skipped, an API page is read with its count (`Page.read_window`).
DEEP_OFFSET = 1000


def sorted_whole(rows: QuerySet) -> bool:
    """Whether ``rows`` are ordered by an expression no index holds (`unindexed`), so any
    page of them sorts every matching row: counting them on the way costs nothing more."""
    return any(not isinstance(o, str) for o in rows.query.order_by)


def keys_from_nearer_end(rows: QuerySet, start: int, stop: int, count: int | None) -> list:
    """The primary keys of ``rows[start:stop]``, walked from whichever end of the ordering
    is nearer. An OFFSET walks every row it skips; a page in the second half is read as the
    first rows of the reversed ordering (the lists' orderings end in a unique key, so the
    reverse is exact), and the last page costs what the first does. ``count``: how many
    rows there are; None where that is not known (a capped count), walked from the start."""
    keys = rows.values_list("pk", flat=True)
    if count is None or not rows.ordered or start <= count - stop:
        return list(keys[start:stop])
    return list(reversed(keys.reverse()[max(count - stop, 0) : max(count - start, 0)]))


def keys_with_count(rows: QuerySet, start: int, stop: int) -> tuple[int, list] | None:
    """(how many ``rows`` there are, the primary keys of ``rows[start:stop]``) in one
    statement; None past the end, where no row carries the count."""
    counted = rows.annotate(window_total=Window(Count("pk")))
    with without_jit(rows.db):
        found = list(counted.values_list("pk", "window_total")[start:stop])
    if not found:
        return None
    return found[0][1], [pk for pk, _total in found]


def with_claims(infos: list[ThreadInfo], provider: str) -> list[ThreadInfo]:
    """The infos with the holds and parks on their threads, one read per kind for all."""
    from checkpoints.status import claims_of
    from checkpoints.store.planning import utcnow

    if provider and infos:
        found = claims_of(provider=provider, thread_ids=[i.thread_id for i in infos], now=utcnow())
        for info in infos:
            info.claims = found.get(info.thread_id, {})
    return infos


def unindexed(field: str) -> Coalesce:
    """``field`` as an expression no index holds, to order a filter's few rows by.

    Ordered by the field itself, PostgreSQL walks its index and tests the filter on every
    row it passes, expecting the matches spread evenly; finished threads are few and old,
    so nearly every thread is read first (110-250 ms at 100,000). Ordered by this, it finds
    the matching rows first and sorts only those.
    """
    return Coalesce(field, field)


def thread_list(
    *,
    saver: StoreSaver,
    user,
    owner: str | None = None,
    state: str | None = None,
    status: str | None = None,
) -> Page:
    """The threads ``user`` may see, newest write first, as a lazily read page source.

    ``owner`` (a user id or username) narrows to that owner's threads; ``state`` to
    ``"waiting"`` or ``"finished"`` ones (marked or not); ``status`` to one kind of the
    status rule (`checkpoints.status.KINDS`; ValueError naming them for another).
    """
    from checkpoints import status as rule
    from checkpoints.store.planning import utcnow

    if status is not None and status not in rule.KINDS:
        raise ValueError(f"status {status!r} is not one of {', '.join(rule.KINDS)}")
    if owners_in_tables(saver):
        ids = Thread.objects.using(saver.db_alias).order_by("-last_write_at", "-pk")
        if not user.is_staff:
            ids = ids.filter(owner_id=user.pk)
        if owner is not None:
            found = find_user(owner)
            ids = ids.filter(owner=found) if found else ids.none()
        marked = is_marked()
        if state == "finished":
            ids = ids.filter(marked)
        elif state == "waiting":
            ids = ids.filter(~marked)
        if status is not None:
            ids = rule.with_status_facts(ids).filter(
                rule.status_condition(status, utcnow(), saver=saver)
            )
        if state == "finished" or status in FEW_AND_OLD:
            # Finished threads are few (the finished horizon is the short one) and old, so
            # walking the write-order index and probing the marks for each thread reads
            # nearly every thread before the first page is full (the planner assumes the
            # marked ones are spread evenly). Ordering by an expression no index holds makes
            # it join the marks first and sort only the marked threads. So for the status
            # rule's kinds that keep few old threads.
            ids = ids.order_by(unindexed("last_write_at").desc(), "-pk")
        return Page(
            ids,
            ThreadInfo.from_row,
            lambda pks: thread_rows(saver).filter(pk__in=pks),
            provider=saver.provider,
            costly=status is not None,
        )
    if not user.is_staff or owner is not None:
        return Page([], ThreadInfo.from_row)
    ids = saver.threads()
    if state is None and status is None:
        return Page(
            ids, lambda thread_id: ThreadInfo.from_saver(saver, thread_id), provider=saver.provider
        )
    # The state and the status live in the ledger and the heads: read each thread to filter.
    infos = with_claims([ThreadInfo.from_saver(saver, t) for t in ids], saver.provider)
    kept = [
        i
        for i in infos
        if (state is None or i.state == state) and (status is None or i.status.kind == status)
    ]
    return Page(kept, lambda info: info)


# The status rule's kinds whose threads are few and old (see `unindexed`).
FEW_AND_OLD = ("finished", "due", "held", "parked")


def read_head_words(*, saver: StoreSaver, info: ThreadInfo) -> ThreadInfo:
    """Fill in what the thread's head asks, or the error it holds, for the status's words
    (one thread's detail; a list shows "an interrupt")."""
    from checkpoints.channels import ERROR, INTERRUPT
    from checkpoints.status import question_of

    if not (info.has_interrupt or info.has_error):
        return info
    head = saver.get_tuple({"configurable": {"thread_id": info.thread_id, "checkpoint_ns": ""}})
    for _task, channel, value in (head.pending_writes if head else None) or ():
        if channel == INTERRUPT and not info.question:
            info.question = question_of(value)
        elif channel == ERROR and not info.error:
            info.error = str(value)[:300]
    return info


def not_found(thread_id: str) -> ThreadNotFound:
    return ThreadNotFound(f"thread {thread_id!r} not found", field="thread_id")


def owner_name(*, saver: StoreSaver, thread_id: str) -> str:
    """The username of the thread's owner; "" where it has none or the store records none."""
    if not owners_in_tables(saver):
        return ""
    field = f"owner__{get_user_model().USERNAME_FIELD}"
    rows = Thread.objects.using(saver.db_alias).filter(thread_id=str(thread_id))
    return rows.values_list(field, flat=True).first() or ""


def thread_get(*, saver: StoreSaver, user, thread_id: str) -> ThreadInfo:
    """The thread when ``user`` may see it; ThreadNotFound otherwise (also for others')."""
    if owners_in_tables(saver):
        row = visible_rows(user, saver).filter(thread_id=thread_id).first()
        if row is None:
            raise not_found(thread_id)
        return with_claims([ThreadInfo.from_row(row)], saver.provider)[0]
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if not user.is_staff or saver.get_tuple(root) is None:
        raise not_found(thread_id)
    return with_claims([ThreadInfo.from_saver(saver, thread_id)], saver.provider)[0]


def threads_named(*, saver: StoreSaver, user, thread_ids: Sequence[str]) -> list[ThreadInfo]:
    """The threads of ``thread_ids`` that ``user`` may see, in the order named, the others
    left out: one query (one round trip on Redis), not one per id."""
    wanted = list(dict.fromkeys(str(t) for t in thread_ids))
    if not wanted:
        return []
    if owners_in_tables(saver):
        found = {
            row.thread_id: ThreadInfo.from_row(row)
            for row in visible_rows(user, saver).filter(thread_id__in=wanted)
        }
    elif user.is_staff:
        written = saver.last_writes(wanted)
        found = {t: ThreadInfo.from_saver(saver, t) for t in wanted if t in written}
    else:
        return []
    return with_claims([found[t] for t in wanted if t in found], saver.provider)


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


# -- what the admin's pages read of the ORM tables (``alias``: the store the page reads) ---
def with_checkpoint_count(rows: QuerySet) -> QuerySet:
    """Thread rows annotated with ``checkpoint_count``; correlated per row and answered from
    the (thread, ns, checkpoint_id) index, so its cost follows the page, not the table."""
    count = (
        Checkpoint.objects.filter(thread=OuterRef("pk"))
        .order_by()
        .values("thread")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return rows.annotate(checkpoint_count=Coalesce(Subquery(count, output_field=IntegerField()), 0))


def thread_pks(*, alias: str, thread_ids: Iterable[str]) -> dict[str, int]:
    """thread id -> its row's pk, for those of ``thread_ids`` the store holds."""
    rows = Thread.objects.using(alias).filter(thread_id__in=set(thread_ids))
    return dict(rows.values_list("thread_id", "pk"))


def thread_by_pk(*, alias: str, pk: int) -> Thread | None:
    return Thread.objects.using(alias).filter(pk=pk).first()


def checkpoint_rows(*, alias: str) -> QuerySet:
    """The store's checkpoint rows, without their bodies."""
    return Checkpoint.objects.using(alias).defer("checkpoint")


def checkpoint_row(
    *, alias: str, thread_id: str, checkpoint_id: str, ns: str = ""
) -> Checkpoint | None:
    return (
        checkpoint_rows(alias=alias)
        .filter(thread__thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
        .first()
    )


def head_row(*, alias: str, thread_id: str, ns: str = "") -> Checkpoint | None:
    """The newest checkpoint of the thread's namespace, with its thread."""
    return (
        checkpoint_rows(alias=alias)
        .select_related("thread")
        .filter(thread__thread_id=thread_id, checkpoint_ns=ns)
        .order_by("-checkpoint_id")
        .first()
    )


def children_of(*, alias: str, row: Checkpoint) -> list[tuple[int, str, str]]:
    """(pk, checkpoint id, other thread id or "") of checkpoints whose parent is ``row``."""
    rows = Checkpoint.objects.using(alias)
    same_thread = list(
        rows.filter(
            thread_id=row.thread_id,
            checkpoint_ns=row.checkpoint_ns,
            parent_checkpoint_id=row.checkpoint_id,
        )
        .order_by("checkpoint_id")
        .values_list("pk", "checkpoint_id")[:CHILD_LINKS]
    )
    # Forks start other threads; their first checkpoint names this one in its metadata.
    forks = list(
        rows.filter(
            source="fork",
            metadata__forked_from__checkpoint_id=row.checkpoint_id,
            metadata__forked_from__thread_id=row.thread.thread_id,
        )
        .order_by("checkpoint_id")
        .values_list("pk", "checkpoint_id", "thread__thread_id")[:CHILD_LINKS]
    )
    return [(pk, cid, "") for pk, cid in same_thread] + forks


def forks_from(*, alias: str, thread_id: str) -> list[tuple[str, int, str]]:
    """(checkpoint id forked from, forked thread's pk, its thread id) for ``thread_id``.

    A fork's first checkpoint names its origin in its metadata; PostgreSQL answers the
    containment from the metadata GIN index, SQLite by reading the fork rows.
    """
    rows = Checkpoint.objects.using(alias).filter(source="fork")
    if connections[alias].vendor == "postgresql":
        rows = rows.filter(metadata__contains={"forked_from": {"thread_id": thread_id}})
    else:
        rows = rows.filter(metadata__forked_from__thread_id=thread_id)
    found = rows.order_by("checkpoint_id").values_list(
        "metadata__forked_from__checkpoint_id", "thread_id", "thread__thread_id"
    )
    return [(str(cid), pk, tid) for cid, pk, tid in found[:CHILD_LINKS]]


def neighbours(*, alias: str, pk) -> tuple[dict | None, tuple | None, tuple | None]:
    """The checkpoint row ``pk`` (thread pk, ns, id), and the (pk, checkpoint id) of the
    older and the newer checkpoint of the same thread and namespace (None at either end)."""
    rows = Checkpoint.objects.using(alias)
    row = rows.filter(pk=pk).values("thread_id", "checkpoint_ns", "checkpoint_id").first()
    if row is None:
        return None, None, None
    same = rows.filter(thread_id=row["thread_id"], checkpoint_ns=row["checkpoint_ns"])

    def nearest(lookup: str, order: str):
        near = same.filter(**{f"checkpoint_id__{lookup}": row["checkpoint_id"]})
        return near.order_by(order).values_list("pk", "checkpoint_id").first()

    return row, nearest("lt", "-checkpoint_id"), nearest("gt", "checkpoint_id")


def checkpoint_windows(
    *, alias: str, thread_pk: int, window: int, page_ns: str = "", before: str | None = None
) -> list[tuple[str, list[tuple], int, list[tuple[str, str | None]]]]:
    """Per namespace of the thread (root first): a window of ``window`` checkpoints as
    (pk, checkpoint id, parent id, source, step), newest first; how many older ones were left
    out; and the (checkpoint id, parent id) of each newer one, oldest first. A window ends at
    its namespace's head, but ``page_ns``'s ends just before the checkpoint id ``before``."""
    checkpoints = Checkpoint.objects.using(alias).filter(thread_id=thread_pk)
    namespaces = sorted(
        set(checkpoints.order_by().values_list("checkpoint_ns", flat=True).distinct())
    )
    found = []
    for ns in namespaces:
        same = checkpoints.filter(checkpoint_ns=ns)
        paged = ns == page_ns and before is not None
        shown = same.filter(checkpoint_id__lt=before) if paged else same
        rows = list(
            shown.order_by("-checkpoint_id").values_list(
                "pk", "checkpoint_id", "parent_checkpoint_id", "source", "step"
            )[: window + 1]
        )
        left_out = 0
        if len(rows) > window:
            rows = rows[:window]
            left_out = shown.filter(checkpoint_id__lt=rows[-1][1]).count()
        # The newer ones' links place the head's path in an older window.
        newer = (
            list(
                same.filter(checkpoint_id__gte=before)
                .order_by("checkpoint_id")
                .values_list("checkpoint_id", "parent_checkpoint_id")
            )
            if paged
            else []
        )
        found.append((ns, rows, left_out, newer))
    return found


def newest_checkpoints(*, alias: str, thread_pk: int, limit: int) -> list[tuple]:
    """(pk, checkpoint id, source, step, written) of the thread's newest checkpoints."""
    return list(
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk)
        .order_by("-checkpoint_id")
        .values_list("pk", "checkpoint_id", "source", "step", "created_at")[:limit]
    )


def head_writes(*, alias: str, heads: dict[int, str], channel: str) -> QuerySet:
    """(thread pk, task id, idx, task path, type, blob) of the writes on ``channel`` at each
    thread's head checkpoint (``heads``: thread pk -> head checkpoint id), root namespace."""
    wanted = Q()
    for thread_pk, head_id in heads.items():
        wanted |= Q(thread_id=thread_pk, checkpoint_id=head_id)
    return (
        PendingWrite.objects.using(alias)
        .filter(wanted, checkpoint_ns="", channel=channel)
        .order_by("thread_id", "task_id", "idx")
        .values_list("thread_id", "task_id", "idx", "task_path", "type", "blob")
    )


def task_paths(*, alias: str, thread_pk: int, checkpoint_id: str, ns: str = "") -> dict[str, str]:
    """task id -> task path of the writes at a checkpoint (the root namespace's by default)."""
    rows = PendingWrite.objects.using(alias).filter(
        thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id=checkpoint_id
    )
    return dict(rows.values_list("task_id", "task_path"))


def writers_of(
    *, alias: str, checkpoints: Iterable[tuple[int, str, str]]
) -> list[tuple[int, str, str, str]]:
    """(thread pk, ns, checkpoint id, task path) of the writes at each of ``checkpoints``
    ((thread pk, ns, checkpoint id)): the tasks that wrote their children."""
    # One IN list per (thread, namespace): a history page is one of each, where an OR of 50
    # (thread, namespace, id) triples cost more to build than to run.
    by_place: dict[tuple, set[str]] = {}
    for thread_pk, ns, checkpoint_id in checkpoints:
        by_place.setdefault((thread_pk, ns), set()).add(checkpoint_id)
    if not by_place:
        return []
    wanted = Q()
    for (thread_pk, ns), ids in by_place.items():
        wanted |= Q(thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id__in=sorted(ids))
    return list(
        PendingWrite.objects.using(alias)
        .filter(wanted)
        .values_list("thread_id", "checkpoint_ns", "checkpoint_id", "task_path")
    )


def channel_sizes(
    *, alias: str, thread_pk: int, ns: str, versions: dict[str, str]
) -> dict[str, int]:
    """Stored bytes of each channel's value at ``versions`` (after compression)."""
    if not versions:
        return {}
    wanted = Q()
    for channel, version in versions.items():
        wanted |= Q(channel=channel, version=version)
    rows = (
        ChannelBlob.objects.using(alias)
        .filter(wanted, thread_id=thread_pk, checkpoint_ns=ns)
        .annotate(size=Length("blob"))
        .values_list("channel", "size")
    )
    return {channel: size or 0 for channel, size in rows}


# -- the admin's words: subgraph interrupts, namespaces, branches (checkpoints/admin) ------------
def subgraph_interrupts(
    *, alias: str, places: Iterable[tuple[int, str]], channel: str
) -> list[tuple[int, str, str, str]]:
    """(thread pk, namespace, checkpoint id, task path) of the ``channel`` writes in the
    namespaces under each of ``places`` ((thread pk, namespace prefix)), newest first.

    A subgraph's checkpoints live in the namespace ``"<node>:<task id>"`` of the parent task
    that ran it (nested ones add ``"|<node>:<task id>"``): the parent's interrupt write names
    the subgraph's node; the writes here name the node inside it that asked.
    """
    wanted = Q()
    for thread_pk, prefix in places:
        wanted |= Q(thread_id=thread_pk, checkpoint_ns__startswith=prefix)
    if not wanted:
        return []
    return list(
        PendingWrite.objects.using(alias)
        .filter(wanted, channel=channel)
        .order_by("-checkpoint_id")
        .values_list("thread_id", "checkpoint_ns", "checkpoint_id", "task_path")[:500]
    )


def namespaces_of(*, alias: str, thread_pk: int, limit: int) -> list[str]:
    """The thread's first ``limit`` namespaces in order, root ("") first.

    One index seek per namespace (the next one after the last found), so a thread of a
    million checkpoints in three namespaces costs three seeks, not a scan.
    """
    rows = Checkpoint.objects.using(alias).filter(thread_id=thread_pk).order_by("checkpoint_ns")
    found: list[str] = []
    nxt = rows.values_list("checkpoint_ns", flat=True).first()
    while nxt is not None and len(found) < limit:
        found.append(nxt)
        nxt = rows.filter(checkpoint_ns__gt=nxt).values_list("checkpoint_ns", flat=True).first()
    return found


def lineage_links(
    *, alias: str, thread_pk: int, ns: str, since: str, limit: int
) -> list[tuple[str, str | None, str, Any]]:
    """(checkpoint id, parent id, source, rollback metadata) of the namespace's checkpoints
    from ``since`` on, newest first, at most ``limit``: what a branch is traced from."""
    return list(
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id__gte=since)
        .order_by("-checkpoint_id")
        .values_list("checkpoint_id", "parent_checkpoint_id", "source", "metadata__rollback")[
            :limit
        ]
    )
