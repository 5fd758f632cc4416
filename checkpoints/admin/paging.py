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
from django.utils.functional import cached_property

from checkpoints.selectors import without_jit


class IndexPaginator(Paginator):
    def __init__(self, object_list, per_page, orphans=0, allow_empty_first_page=True, cap=None):
        super().__init__(object_list, per_page, orphans, allow_empty_first_page)
        self.cap = cap

    @cached_property
    def count(self) -> int:
        with without_jit(self.object_list.db):
            if self.cap is None:
                return super().count
            # COUNT(*) over a LIMITed subquery of bare ids, in no order: at most ``cap``
            # rows are read, and none of the list's annotations.
            return self.object_list.order_by().values("pk")[: self.cap].count()

    @property
    def capped(self) -> bool:
        return self.cap is not None and self.count >= self.cap

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        with without_jit(self.object_list.db):
            pks = self._page_keys(bottom, top)
            rows = {row.pk: row for row in self.object_list.filter(pk__in=pks).order_by()}
        return self._get_page([rows[pk] for pk in pks if pk in rows], number, self)

    def _page_keys(self, bottom: int, top: int) -> list:
        """The page's primary keys, walked from whichever end of the ordering is nearer.

        An OFFSET walks every row it skips; a page in the second half is read as the first
        rows of the reversed ordering (the admin's orderings always end in a unique key, so
        the reverse is exact), and the last page costs what the first does. Not with a
        capped count, whose far end is unknown.
        """
        keys = self.object_list.values_list("pk", flat=True)
        if self.cap is not None or not self.object_list.ordered or bottom <= self.count - top:
            return list(keys[bottom:top])
        return list(reversed(keys.reverse()[self.count - top : self.count - bottom]))
