"""The finished mark, read in one way: one annotation and one condition on Thread rows.

The API's, the admin's and the status rule's "finished" are all this condition, and the
run rule (written since the mark) is this one function.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from checkpoints.models import FinishedMark


def written_since(marked_at: datetime | None, last_write_at: datetime | None) -> bool:
    """The run rule: a thread marked finished and written after the mark."""
    return marked_at is not None and last_write_at is not None and last_write_at > marked_at


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
