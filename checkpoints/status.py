"""A thread's status at a glance: what an operator needs to know first.

One rule, in its two forms side by side: `thread_status` (one thread, with the detail that
goes with it: the admin list and the thread page) and `status_condition` (the same rule as
a condition on Thread rows: the admin's status filter). Both read the facts
`with_status_facts` annotates; tests/checkpoints/test_status_rule.py holds them equal.

The order matters: a thread marked finished is due whatever else is true of it; a park is
a promise to come back; an interrupt waits on a person; an error needs one; the rest are
recently written or idle. A finished thread written since it was marked shows "finished,
written since": the sweep spares it (retention.sweep's run rule) until it is marked again
or goes idle. Parks are retention's: the SQL form has no "parked" (a parked thread is
listed by what else is true of it), and the Python form shows one only when told of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import BooleanField, Exists, Func, OuterRef, Q, QuerySet, Subquery
from django.utils.timesince import timeuntil

from checkpoints.channels import ERROR, INTERRUPT, RESUME
from checkpoints.models import Checkpoint, PendingWrite
from checkpoints.selectors import is_marked, with_finished_mark, written_since
from checkpoints.store.planning import ThreadRetention

# Written within this long ago: someone (a graph, a person) is probably still at it.
RECENT = timedelta(minutes=15)

KINDS = {
    "finished": "Finished",
    "parked": "Parked",
    "waiting_on_human": "Waiting on a human",
    "failed": "Failed",
    "recent": "Recently written",
    "idle": "Idle",
}


@dataclass(frozen=True)
class ThreadStatus:
    kind: str
    detail: str = ""

    @property
    def label(self) -> str:
        return KINDS[self.kind]


def node_of(task_path: str) -> str:
    """The node a pull task ran (``"~__pregel_pull, approve"`` -> ``approve``)."""
    head, _, rest = (task_path or "").partition(", ")
    return rest.split(",")[0].strip() if head.endswith("__pregel_pull") else ""


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}".strip()


# -- the Python form ---------------------------------------------------------------------
def thread_status(
    *,
    now: datetime,
    last_write_at: datetime | None,
    waiting_minutes: int,
    mark_due: datetime | None = None,
    marked_at: datetime | None = None,
    park_deadline: datetime | None = None,
    interrupted: bool = False,
    question: str = "",
    node: str = "",
    error: str = "",
) -> ThreadStatus:
    """The one status a thread shows, with the detail that goes with it."""
    if mark_due is not None:
        if written_since(marked_at, last_write_at):
            return ThreadStatus(
                "finished",
                f"finished, written since: written {_when(last_write_at)}, after its mark "
                f"at {_when(marked_at)}; the sweep spares it",
            )
        if mark_due <= now:
            return ThreadStatus("finished", f"due since {_when(mark_due)}")
        return ThreadStatus("finished", f"due at {_when(mark_due)}")
    if park_deadline is not None and park_deadline > now:
        return ThreadStatus("parked", f"parked until {_when(park_deadline)}")
    if interrupted:
        asked = f"“{question}”" if question else "an interrupt"
        return ThreadStatus("waiting_on_human", f"{asked} at {node}" if node else asked)
    if error:
        return ThreadStatus("failed", error)
    if last_write_at is not None and now - last_write_at <= RECENT:
        return ThreadStatus("recent", f"written {_when(last_write_at)}")
    if last_write_at is None:
        return ThreadStatus("idle", "never written")
    due = last_write_at + timedelta(minutes=waiting_minutes)
    if due <= now:
        return ThreadStatus("idle", f"past its waiting horizon since {_when(due)}")
    return ThreadStatus("idle", f"due in {timeuntil(due, now)}")


def row_status(
    row: Any,
    *,
    now: datetime,
    park_deadline: datetime | None = None,
    question: str = "",
    node: str = "",
    error: str = "",
) -> ThreadStatus:
    """`thread_status` of a Thread row annotated by `with_status_facts`; ``question``,
    ``node`` and ``error`` are what the caller read of the head's writes, if anything."""
    return thread_status(
        now=now,
        last_write_at=row.last_write_at,
        waiting_minutes=ThreadRetention(row.waiting_minutes).in_force().waiting_minutes,
        mark_due=row.finished_due_at,
        marked_at=row.finished_marked_at,
        park_deadline=park_deadline,
        interrupted=row.has_interrupt and not row.has_resume,
        question=question,
        node=node,
        error=error or ("the last task failed" if row.has_error else ""),
    )


# -- the facts both forms read -----------------------------------------------------------
def with_status_facts(rows: QuerySet) -> QuerySet:
    """Thread rows annotated with what the rule reads: the finished mark (selectors'
    ``finished_*``), ``head_id`` (the root namespace's newest checkpoint) and whether that
    head holds an interrupt, a resume or an error write. Correlated per row: answered from
    the (thread, ns, checkpoint_id) index, so the cost follows the page, not the table."""
    head = (
        Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="")
        .order_by("-checkpoint_id")
        .values("checkpoint_id")[:1]
    )

    def at_head(channel: str) -> Exists:
        return Exists(
            PendingWrite.objects.filter(
                thread=OuterRef("pk"),
                checkpoint_ns="",
                checkpoint_id=OuterRef("head_id"),
                channel=channel,
            )
        )

    return (
        with_finished_mark(rows)
        .annotate(head_id=Subquery(head))
        .annotate(
            has_interrupt=at_head(INTERRUPT),
            has_resume=at_head(RESUME),
            has_error=at_head(ERROR),
        )
    )


# -- the SQL form ------------------------------------------------------------------------
# The kinds the SQL form tells apart ("parked" is retention's: see the module's docstring).
CONDITION_KINDS = tuple(kind for kind in KINDS if kind != "parked")


def status_condition(kind: str, now: datetime) -> Q:
    """The condition on rows annotated by `with_status_facts` that `thread_status` gives
    ``kind``; ValueError for a kind the SQL form does not know."""
    # Each test starts from a small set read once (hashed): the marked threads, the
    # threads with any interrupt or error write (a partial index); only a thread in such a
    # set has its head asked. So the rule costs little per thread even where it must look
    # at every thread (recent, idle) to count them.
    marked = Q(is_marked())
    # A rule's own test looks its few ids up (_AmongIds); a negated one keeps IN, which
    # PostgreSQL hashes once, where NOT (id = ANY(...)) would walk the array per thread.
    asked, erred = _holding(INTERRUPT), _holding(ERROR)
    heads_waiting = Q(has_interrupt=True) & Q(has_resume=False)
    waiting = Q(pk__in=asked) & heads_waiting
    failed = Q(pk__in=erred) & Q(has_error=True)
    recent = Q(last_write_at__gte=now - RECENT)
    if kind == "finished":
        return marked
    if kind == "waiting_on_human":
        return ~marked & Q(_AmongIds("pk", asked)) & heads_waiting
    if kind == "failed":
        return ~marked & ~waiting & Q(_AmongIds("pk", erred)) & Q(has_error=True)
    if kind == "recent":
        return ~marked & ~waiting & ~failed & recent
    if kind == "idle":
        return ~marked & ~waiting & ~failed & ~recent
    raise ValueError(f"status {kind!r} is not one of {', '.join(CONDITION_KINDS)}")


def _holding(channel: str):
    """Threads with a write on ``channel`` in their root namespace, at any checkpoint."""
    # Any namespace: a superset is fine (the head is asked next), and the partial index
    # alone answers it.
    return PendingWrite.objects.filter(channel=channel).values("thread_id")


class _AmongIds(Func):
    """``column IN (subquery)`` for a subquery of a few ids out of a big table.

    PostgreSQL plans ``IN (subquery)`` as a semi join and, expecting many rows, scans all
    100,000 threads for the 1,000 the subquery names (29 ms); ``= ANY(ARRAY(subquery))``
    runs the subquery once and looks the ids up by primary key (7 ms).
    """

    output_field = BooleanField()
    template = "%(expressions)s"
    arg_joiner = " IN "

    def as_postgresql(self, compiler, connection, **extra):
        # The subquery compiles in its own parentheses: "id = ANY(ARRAY(SELECT ...))".
        return self.as_sql(
            compiler, connection, template="%(expressions)s)", arg_joiner=" = ANY(ARRAY", **extra
        )
