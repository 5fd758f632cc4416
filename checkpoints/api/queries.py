"""What the thread APIs read: the thread list, one thread's head words, its history.

Both the REST API and the LangGraph-compatible one list threads here; who may see which
thread is `checkpoints.selectors`, and paging keys first `checkpoints.pages`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from checkpoints import status as rule
from checkpoints.channels import ERROR, INTERRUPT
from checkpoints.graphs import time_travel_for
from checkpoints.marks import is_marked
from checkpoints.models import Thread
from checkpoints.pages import Page, unindexed
from checkpoints.selectors import ThreadInfo, owners_in_tables, thread_rows, with_claims
from checkpoints.status import question_of
from checkpoints.store.contract import StoreSaver
from checkpoints.store.orm.ledger import find_user
from checkpoints.store.planning import utcnow


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
    if not (info.has_interrupt or info.has_error):
        return info
    head = saver.get_tuple({"configurable": {"thread_id": info.thread_id, "checkpoint_ns": ""}})
    for _task, channel, value in (head.pending_writes if head else None) or ():
        if channel == INTERRUPT and not info.question:
            info.question = question_of(value)
        elif channel == ERROR and not info.error:
            info.error = str(value)[:300]
    return info


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
    return time_travel_for(saver, thread_id).get_state_history(
        thread_id,
        limit=limit,
        before=before,
        source=source,
        filter=metadata or None,
        checkpoint_ns=checkpoint_ns,
    )
