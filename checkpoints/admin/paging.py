"""The paginator of the admin's big lists (threads, checkpoints, marks).

Django's reads a page as ``queryset[offset:offset + n]``: every row a deep page skips is
read with all its annotations (a subquery or three per row), and the count reads every
matching row. This one reads the page's primary keys first (a walk of the ordering's
index) and then only those rows with their annotations; ``cap`` bounds the count, for a
table too big to count on every page load.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property


class IndexPaginator(Paginator):
    def __init__(self, object_list, per_page, orphans=0, allow_empty_first_page=True, cap=None):
        super().__init__(object_list, per_page, orphans, allow_empty_first_page)
        self.cap = cap

    @cached_property
    def count(self) -> int:
        if self.cap is None:
            return super().count
        # COUNT(*) over a LIMITed subquery: at most ``cap`` index entries are read.
        return self.object_list[: self.cap].count()

    @property
    def capped(self) -> bool:
        return self.cap is not None and self.count >= self.cap

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        pks = list(self.object_list.values_list("pk", flat=True)[bottom:top])
        rows = {row.pk: row for row in self.object_list.filter(pk__in=pks).order_by()}
        return self._get_page([rows[pk] for pk in pks if pk in rows], number, self)
