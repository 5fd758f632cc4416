"""The paginator of the admin's big lists (threads, checkpoints, marks).

Django's reads a page as ``queryset[offset:offset + n]``: every row a deep page skips is
read with all its annotations (a subquery or three per row), and the count reads every
matching row. This one reads the page's primary keys first (a walk of the ordering's
index) and then only those rows with their annotations; ``cap`` bounds the count, for a
table too big to count on every page load.

Both run with PostgreSQL's JIT off: the status filters' correlated subqueries make the
planner's estimate large enough to compile the query (650 ms on 100,000 threads) for a
run that takes 50 ms.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

from checkpoints.pages import (
    keys_from_nearer_end,
    keys_with_count,
    sorted_whole,
    without_jit,
)
from checkpoints.store.registry import dialect_saver


class IndexPaginator(Paginator):
    def __init__(
        self,
        object_list,
        per_page,
        orphans=0,
        allow_empty_first_page=True,
        cap=None,
        asked_page=None,
        rows_for=None,
        walk=False,
    ):
        super().__init__(object_list, per_page, orphans, allow_empty_first_page)
        self.cap = cap
        # Reads the page's rows by primary key with their annotations but not the list's
        # filters, which chose those keys already (a status filter's condition compiled
        # and run a third time cost 4-8 ms a page); the list itself by default.
        self.rows_for = rows_for or (lambda pks: self.object_list.filter(pk__in=pks))
        # Most rows match (`status.MANY`): a page walks the ordering's index, never a sort.
        self.walk = walk
        # The page the request asks for: a list sorted whole reads it with its count.
        self.asked_page = asked_page
        self._read: tuple[int, list] | None = None

    @cached_property
    def count(self) -> int:
        counted = self._count_with_page()
        if counted is not None:
            return counted
        with without_jit(self.object_list.db):
            if self.cap is None:
                return super().count
            # COUNT(*) over a LIMITed subquery of bare ids, in no order: at most ``cap``
            # rows are read, and none of the list's annotations.
            return self.object_list.order_by().values("pk")[: self.cap].count()

    def _count_with_page(self) -> int | None:
        """The exact count, read with the asked page's keys in one statement, where the
        list is sorted whole anyway (the few, old kinds): a second pass to count them
        cost as much as the page (finished at 100,000 threads: 28 ms each)."""
        if not self.asked_page or not sorted_whole(self.object_list):
            return None
        bottom = (self.asked_page - 1) * self.per_page
        found = keys_with_count(self.object_list, bottom, bottom + self.per_page + self.orphans)
        if found is None:
            return None
        count, keys = found
        self._read = (self.asked_page, keys)
        return count

    @property
    def capped(self) -> bool:
        if self._read is not None:
            return False  # counted exactly, with the page
        return self.cap is not None and self.count >= self.cap

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        with without_jit(self.object_list.db):
            if self._read is not None and self._read[0] == number:
                pks = self._read[1][: top - bottom]
            elif self.walk and (dialect := dialect_saver(self.object_list.db)).prefers_index_walk:
                # The planner multiplies the status rule's selectivities (idle: 3,706
                # expected of 39,000) and sorts every match for a deep page (54 ms at
                # 100,000 threads) where the walk finds it in 8. For the keys alone: the
                # rows' annotations need their sorts.
                with connections[self.object_list.db].cursor() as cursor:
                    dialect.walk_the_index(cursor)
                    pks = self._page_keys(bottom, top)
                    cursor.execute("RESET enable_sort")
            else:
                pks = self._page_keys(bottom, top)
            rows = {row.pk: row for row in self.rows_for(pks).order_by()}
        return self._get_page([rows[pk] for pk in pks if pk in rows], number, self)

    def _page_keys(self, bottom: int, top: int) -> list:
        """The page's primary keys, from the nearer end where the count is exact."""
        known = None if self.cap is not None else self.count
        return keys_from_nearer_end(self.object_list, bottom, top, known)
