"""Keyset pages over one thread's checkpoints, newest first: ``?before=`` / ``?after=``.

A page is named by the checkpoint id it starts after, never by an OFFSET, so a page deep
in a long thread costs what the first one does (an index range on the thread's key), and
a checkpoint written while someone pages does not shift every later page by one row.
Checkpoint ids order a thread's checkpoints in time; rows of two namespaces that share an
id are kept on one page, so a cursor never splits them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

BEFORE = "before"
AFTER = "after"
CURSORS = (BEFORE, AFTER)


@dataclass
class KeysetPage:
    rows: list
    # The cursors of the neighbouring pages, None where there is none.
    older: str | None
    newer: str | None


def _with_ties(queryset: QuerySet, rows: list) -> list:
    """``rows`` plus the rows sharing the boundary row's checkpoint id, newest first."""
    if rows:
        edge = rows[-1].checkpoint_id
        ties = queryset.filter(checkpoint_id=edge).exclude(pk__in=[r.pk for r in rows])
        rows = rows + list(ties)
    return sorted(rows, key=lambda r: (r.checkpoint_id, r.pk), reverse=True)


def page(
    queryset: QuerySet,
    *,
    size: int,
    before: str | None = None,
    after: str | None = None,
    at: str | None = None,
) -> KeysetPage:
    """One page of ``queryset`` (a thread's checkpoints, filtered as the list is).

    ``before``: the ``size`` rows older than that id; ``after``: the ``size`` rows newer
    than it; ``at``: the page that starts with that id; none of them: the newest rows.
    """
    if after is not None:
        rising = list(
            queryset.filter(checkpoint_id__gt=after).order_by("checkpoint_id", "pk")[:size]
        )
        rows = _with_ties(queryset, rising)
    else:
        if before is not None:
            queryset_page = queryset.filter(checkpoint_id__lt=before)
        elif at is not None:
            queryset_page = queryset.filter(checkpoint_id__lte=at)
        else:
            queryset_page = queryset
        rows = _with_ties(queryset, list(queryset_page.order_by("-checkpoint_id", "-pk")[:size]))
    if not rows:
        return KeysetPage(rows=[], older=None, newer=None)
    oldest, newest = rows[-1].checkpoint_id, rows[0].checkpoint_id
    older = oldest if queryset.filter(checkpoint_id__lt=oldest).exists() else None
    newer = newest if queryset.filter(checkpoint_id__gt=newest).exists() else None
    return KeysetPage(rows=rows, older=older, newer=newer)
