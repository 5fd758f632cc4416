"""Pages of thread rows read keys first: the slice reads bare primary keys in index order,
and only the page's rows are read whole, so a deep page costs an index walk.

Used by the API's thread list (`checkpoints.api.queries.thread_list`) and the admin's
paginator (`checkpoints.admin.paging`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import Count, QuerySet, Window
from django.db.models.functions import Coalesce

from checkpoints.selectors import ThreadInfo, with_claims
from checkpoints.store.registry import dialect_saver


def without_jit(alias: str):
    """The dialect's tuning of the console's heavier reads on ``alias`` (PostgreSQL: JIT off)."""
    return dialect_saver(alias).tuned_reads(alias)


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


def unindexed(field: str) -> Coalesce:
    """``field`` as an expression no index holds, to order a filter's few rows by.

    Ordered by the field itself, PostgreSQL walks its index and tests the filter on every
    row it passes, expecting the matches spread evenly; finished threads are few and old,
    so nearly every thread is read first (110-250 ms at 100,000). Ordered by this, it finds
    the matching rows first and sorts only those.
    """
    return Coalesce(field, field)
