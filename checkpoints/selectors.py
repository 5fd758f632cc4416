"""Which threads a user may see, and what an entrance shows of one: the rule read once.

The API, the LangGraph API, the admin and retention's pages read threads through these
functions, never through the saver's tables: who may see a thread, the finished-mark and
status annotations and the claims on a thread are written here once. The API's list and
history are `checkpoints.api.queries`, the admin's reads of the ORM tables
`checkpoints.admin.queries`, the key-first paginator `checkpoints.pages`.

Ownership is known only where the store records owners (`records_owners`, the ORM
providers). Elsewhere only staff see threads; a non-staff user sees an empty list and a
404 for every thread. Another owner's thread answers exactly like a missing one, so ids of
other users' threads do not leak.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from checkpoints.channels import ERROR, INTERRUPT, RESUME
from checkpoints.errors import CheckpointCodecError, CheckpointEncryptionError, ThreadNotFound
from checkpoints.marks import written_since
from checkpoints.models import Thread
from checkpoints.status import claims_of, thread_status, with_status_facts
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.projection import values_unread


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


def thread_rows(saver: StoreSaver) -> QuerySet:
    """The store's Thread rows, newest write first, annotated with what the status rule
    reads (their finished mark, their head's writes)."""
    rows = Thread.objects.using(saver.db_alias).select_related("owner")
    return with_status_facts(rows).order_by("-last_write_at", "-pk")


def visible_rows(user, saver: StoreSaver) -> QuerySet:
    rows = thread_rows(saver)
    return rows if user.is_staff else rows.filter(owner_id=user.pk)


def with_claims(infos: list[ThreadInfo], provider: str) -> list[ThreadInfo]:
    """The infos with the holds and parks on their threads, one read per kind for all."""
    if provider and infos:
        found = claims_of(provider=provider, thread_ids=[i.thread_id for i in infos], now=utcnow())
        for info in infos:
            info.claims = found.get(info.thread_id, {})
    return infos


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


def thread_pks(*, alias: str, thread_ids: Iterable[str]) -> dict[str, int]:
    """thread id -> its row's pk, for those of ``thread_ids`` the store holds."""
    rows = Thread.objects.using(alias).filter(thread_id__in=set(thread_ids))
    return dict(rows.values_list("thread_id", "pk"))
