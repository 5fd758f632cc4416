"""What the admin's pages read of the ORM tables (``alias``: the store the page reads):
checkpoint rows, their lineage and branches, writes, sizes and subgraph interrupts.

One subject: the admin console's queries on the store's tables, each a page's read, kept
together so the indexes they rely on (checkpoints/models.py) are checked in one place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, IntegerField, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce, Length

from checkpoints import status
from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite, Thread
from checkpoints.store.registry import dialect_saver

# How many children (or forks) of one checkpoint a page links to.
CHILD_LINKS = 20


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


def with_turns(rows: QuerySet) -> QuerySet:
    """Thread rows annotated with ``turns``: the root graph's input checkpoints (one per
    invoke with new input), counted per row like ``checkpoint_count``."""
    inputs = (
        Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="", source="input")
        .order_by()
        .values("thread")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return rows.annotate(turns=Coalesce(Subquery(inputs, output_field=IntegerField()), 0))


def last_writes(*, alias: str, thread_pks: Iterable[int], channel: str) -> list[tuple]:
    """(thread pk, checkpoint id, task id, idx, type, blob) of each thread's newest write on
    ``channel`` in the root namespace: for ``messages``, the message the thread last added,
    a small row beside a head that holds the whole conversation."""
    newest = (
        PendingWrite.objects.filter(thread=OuterRef("pk"), checkpoint_ns="", channel=channel)
        .order_by("-checkpoint_id", "-task_id", "-idx")
        .values("pk")[:1]
    )
    ids = (
        Thread.objects.using(alias)
        .filter(pk__in=list(thread_pks))
        .annotate(last=Subquery(newest))
        .values_list("last", flat=True)
    )
    return list(
        PendingWrite.objects.using(alias)
        .filter(pk__in=[i for i in ids if i is not None])
        .values_list("thread_id", "checkpoint_id", "task_id", "idx", "type", "blob")
    )


def threads_with_metadata(*, alias: str, key: str, values: list) -> QuerySet:
    """The thread pks with a checkpoint whose metadata holds ``key`` equal to one of
    ``values``: from the metadata's GIN index where the database has one."""
    rows = Checkpoint.objects.using(alias)
    if dialect_saver(alias).indexed_json_containment:
        wanted = Q()
        for value in values:
            wanted |= Q(metadata__contains={key: value})
        rows = rows.filter(wanted)
    else:
        rows = rows.annotate(found=KeyTransform(key, "metadata")).filter(found__in=values)
    return rows.order_by().values("thread_id")


def thread_pk_of(*, alias: str, thread_id: str) -> int | None:
    return (
        Thread.objects.using(alias).filter(thread_id=thread_id).values_list("pk", flat=True).first()
    )


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
    if dialect_saver(alias).indexed_json_containment:
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
    row = (
        rows.filter(pk=pk)
        .values("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")
        .first()
    )
    if row is None:
        return None, None, None
    same = rows.filter(thread_id=row["thread_id"], checkpoint_ns=row["checkpoint_ns"])

    def nearest(lookup: str, order: str):
        near = same.filter(**{f"checkpoint_id__{lookup}": row["checkpoint_id"]})
        return near.order_by(order).values_list("pk", "checkpoint_id").first()

    return row, nearest("lt", "-checkpoint_id"), nearest("gt", "checkpoint_id")


def parent_and_head(*, alias: str, row: dict) -> tuple[int | None, int | None]:
    """The pks of the parent and of the namespace's head of ``row`` (a `neighbours` row)."""
    same = Checkpoint.objects.using(alias).filter(
        thread_id=row["thread_id"], checkpoint_ns=row["checkpoint_ns"]
    )
    parent = None
    if row.get("parent_checkpoint_id"):
        parent = (
            same.filter(checkpoint_id=row["parent_checkpoint_id"])
            .values_list("pk", flat=True)
            .first()
        )
    head = same.order_by("-checkpoint_id").values_list("pk", flat=True).first()
    return parent, head


def checkpoint_windows(
    *,
    alias: str,
    thread_pk: int,
    window: int,
    page_ns: str = "",
    before: str | None = None,
    namespaces: Iterable[str] | None = None,
) -> list[tuple[str, list[tuple], int, list[tuple[str, str | None]]]]:
    """Per namespace of the thread (root first; only ``namespaces`` when given): a window of
    ``window`` checkpoints as (pk, checkpoint id, parent id, source, step), newest first;
    how many older ones were left out; and the (checkpoint id, parent id) of each newer one,
    oldest first. A window ends at
    its namespace's head, but ``page_ns``'s ends just before the checkpoint id ``before``."""
    checkpoints = Checkpoint.objects.using(alias).filter(thread_id=thread_pk)
    if namespaces is None:
        namespaces = checkpoints.order_by().values_list("checkpoint_ns", flat=True).distinct()
    namespaces = sorted(set(namespaces))
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


def subgraph_namespaces(*, alias: str, thread_pk: int) -> list[tuple[str, int, str, str]]:
    """(namespace, checkpoints, first checkpoint id, newest checkpoint id) of each subgraph
    namespace of the thread (each a call of a node that ran a subgraph), in the order the
    calls began; one grouped read of the (thread, ns, checkpoint_id) index."""
    rows = (
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk)
        .exclude(checkpoint_ns="")
        .order_by()
        .values("checkpoint_ns")
        .annotate(n=Count("pk"), first=Min("checkpoint_id"), last=Max("checkpoint_id"))
        .values_list("checkpoint_ns", "n", "first", "last")
    )
    return sorted(rows, key=lambda row: (row[2], row[0]))


def call_origins(
    *, alias: str, thread_pk: int, firsts: Iterable[tuple[str, str]]
) -> dict[str, tuple[int, str, int | None, str]]:
    """namespace -> (pk, checkpoint id, step, source) of the root checkpoint whose step ran
    the call, for ``firsts`` ((namespace, its first checkpoint id)): LangGraph names it in
    every subgraph checkpoint's ``metadata["parents"][""]``."""
    firsts = dict(firsts)
    if not firsts:
        return {}
    # Two IN lists matched up here: 50 OR-ed (ns, id) pairs took longer to build than to run.
    rows = Checkpoint.objects.using(alias).filter(
        thread_id=thread_pk, checkpoint_ns__in=list(firsts), checkpoint_id__in=set(firsts.values())
    )
    parent_of = {}
    for ns, cid, metadata in rows.values_list("checkpoint_ns", "checkpoint_id", "metadata"):
        if firsts.get(ns) != cid:
            continue
        parents = metadata.get("parents") if isinstance(metadata, dict) else None
        parent = parents.get("") if isinstance(parents, dict) else None
        if isinstance(parent, str):
            parent_of[ns] = parent
    found = {
        cid: (pk, cid, step, source)
        for pk, cid, step, source in Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk, checkpoint_ns="", checkpoint_id__in=set(parent_of.values()))
        .values_list("pk", "checkpoint_id", "step", "source")
    }
    return {ns: found[cid] for ns, cid in parent_of.items() if cid in found}


def newest_checkpoints(*, alias: str, thread_pk: int, limit: int) -> list[tuple]:
    """(pk, checkpoint id, source, step, written, namespace) of the thread's newest
    checkpoints."""
    return list(
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk)
        .order_by("-checkpoint_id")
        .values_list("pk", "checkpoint_id", "source", "step", "created_at", "checkpoint_ns")[:limit]
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


# The branch switcher (`checkpoints.admin.branches`).


def branch_root_rows(
    *, alias: str, thread_pk: int
) -> list[tuple[int, str, str | None, int | None]]:
    """(pk, checkpoint id, parent id, step) of the thread's root-namespace checkpoints."""
    return list(
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk, checkpoint_ns="")
        .order_by("checkpoint_id")
        .values_list("pk", "checkpoint_id", "parent_checkpoint_id", "step")
    )


def thread_has_branches(*, alias: str, thread_pk: int) -> bool:
    """Whether any root-namespace checkpoint of the thread has two children: one grouped
    query, so a thread that never branched reads none of its rows for the switcher."""
    return (
        Checkpoint.objects.using(alias)
        .filter(thread_id=thread_pk, checkpoint_ns="", parent_checkpoint_id__isnull=False)
        .values("parent_checkpoint_id")
        .annotate(children=Count("pk"))
        .filter(children__gt=1)
        .exists()
    )


# The sweep preview (`retention.admin.sweeps`).


def sweep_preview_facts(*, alias: str, among) -> dict[str, tuple[int, str, Any]]:
    """thread id -> (pk, owner's username or "", last write) of the threads ``among`` (a
    filter on ``thread_id``) names."""
    return {
        tid: (pk, owner or "", last)
        for pk, tid, owner, last in Thread.objects.using(alias)
        .filter(among)
        .values_list("pk", "thread_id", "owner__username", "last_write_at")
    }


def thread_ids_matching(*, alias: str, among, condition) -> set[str]:
    """The ids of the threads ``among`` names whose status facts meet ``condition``."""
    return set(
        status.with_status_facts(Thread.objects.using(alias))
        .filter(among)
        .filter(condition)
        .values_list("thread_id", flat=True)
    )


def threads_with_status_facts(*, alias: str, pks: Iterable[int]) -> list[Thread]:
    """The threads of ``pks`` with the facts their markers are read from."""
    return list(status.with_status_facts(Thread.objects.using(alias)).filter(pk__in=pks))
