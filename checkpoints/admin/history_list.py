"""The checkpoint list: a thread's history paged by keyset, its "jump to" form, and the
nodes that wrote each row, read for the page at once."""

from __future__ import annotations

from datetime import UTC, datetime, time

from django.contrib import messages
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from checkpoints import selectors, status
from checkpoints.admin import keyset
from checkpoints.admin.store_choice import store_alias

# Query parameters the history's "jump to" form sends (see change_list.html).
JUMPS = ("step__lte", "created_at__lte")
THREAD_PARAM = "thread__id__exact"


class HistoryChangeList(ChangeList):
    """The checkpoint list, with the node(s) that wrote each row read for the page at once.

    A thread's history (``thread__id__exact``) is paged by keyset (see `keyset`): the
    cursors and the jump fields position the page; they never filter the rows.
    """

    def __init__(self, request, *args, **kwargs):
        self.keyset = THREAD_PARAM in request.GET
        self.jump_target = None
        super().__init__(request, *args, **kwargs)

    def get_ordering(self, request, queryset):
        # Django applies an order asked for in the URL even on a column that is not
        # sortable (no header link offers it); keep only the sortable ones.
        asked = self.params.get(ORDER_VAR)
        if asked:
            kept = [p for p in asked.split(".") if self._sortable(p)]
            if kept:
                self.params[ORDER_VAR] = ".".join(kept)
            else:
                del self.params[ORDER_VAR]
        return super().get_ordering(request, queryset)

    def _sortable(self, param: str) -> bool:
        try:
            return self.list_display[int(param.rpartition("-")[2])] in self.sortable_by
        except (IndexError, ValueError):
            return False

    def get_filters_params(self, params=None):
        lookup_params = super().get_filters_params(params)
        if self.keyset:
            for name in (*keyset.CURSORS, *JUMPS):
                lookup_params.pop(name, None)
        return lookup_params

    def get_results(self, request):
        self.count_capped = False
        if self.keyset:
            self._keyset_results(request)
        else:
            super().get_results(request)
            self.count_capped = self.paginator.capped
        self._read_nodes()

    def _keyset_results(self, request):
        get = request.GET
        target = self._jump_target(request)
        found = keyset.page(
            self.queryset.order_by(),
            size=self.list_per_page,
            before=None if target else get.get(keyset.BEFORE) or None,
            after=None if target else get.get(keyset.AFTER) or None,
            at=target,
        )
        self.jump_target = target
        for row in found.rows:
            row.is_jump_target = row.checkpoint_id == target
        # Not PAGE_VAR: Django removes every parameter *starting* with a removed name.
        drop = [*keyset.CURSORS, *JUMPS]
        self.older_url = (
            self.get_query_string({keyset.BEFORE: found.older}, remove=drop)
            if found.older
            else None
        )
        self.newer_url = (
            self.get_query_string({keyset.AFTER: found.newer}, remove=drop) if found.newer else None
        )
        self.newest_url = (
            self.get_query_string(remove=drop)
            if any(name in get for name in (*keyset.CURSORS, *JUMPS))
            else None
        )
        # Counting one thread's rows walks its part of the key index: cheap, and worth it.
        self.result_count = self.queryset.order_by().count()
        self.full_result_count = None
        self.show_full_result_count = False
        self.show_admin_actions = True
        self.result_list = found.rows
        self.can_show_all = False
        self.show_all = False
        self.multi_page = bool(found.older or found.newer)
        self.paginator = None

    def _jump_target(self, request) -> str | None:
        """The checkpoint id the jump form names: the newest at or before that step/time."""
        step, moment = (
            request.GET.get("step__lte", "").strip(),
            request.GET.get("created_at__lte", "").strip(),
        )
        if not step and not moment:
            return None
        rows = self.queryset.order_by("-checkpoint_id", "-pk")
        if step:
            try:
                rows = rows.filter(step__lte=int(step))
            except ValueError:
                messages.error(request, f"Jump to step: {step!r} is not a whole number.")
                return None
        if moment:
            when = parse_moment(moment)
            if when is None:
                messages.error(
                    request,
                    f"Jump to time: {moment!r} is not a date and time like 2026-12-01 14:05:00.",
                )
                return None
            try:
                # The database compares in UTC: an offset can carry a time past year 1 or 9999.
                when = when.astimezone(UTC)
            except OverflowError:
                messages.error(
                    request,
                    f"Jump to time: {moment!r} is out of range; times run from "
                    "0001-01-01 00:00:00 to 9999-12-31 23:59:59 UTC.",
                )
                return None
            rows = rows.filter(created_at__lte=when)
        target = rows.values_list("checkpoint_id", flat=True).first()
        if target is None:
            asked = " and ".join(
                text
                for text in (f"step {step}" if step else "", f"{moment}" if moment else "")
                if text
            )
            messages.warning(
                request, f"No checkpoint of this thread at or before {asked}; showing the oldest."
            )
            oldest = self.queryset.order_by("checkpoint_id").values_list("checkpoint_id", flat=True)
            return oldest.first()
        return target

    def _read_nodes(self):
        rows = list(self.result_list)
        parents = {(r.thread_id, r.checkpoint_ns, r.parent_checkpoint_id) for r in rows}
        parents = {p for p in parents if p[2]}
        nodes: dict[tuple, list[str]] = {}
        found = selectors.writers_of(alias=store_alias(), checkpoints=parents)
        for thread_pk, ns, checkpoint_id, task_path in found:
            node = status.node_of(task_path)
            names = nodes.setdefault((thread_pk, ns, checkpoint_id), [])
            if node and node not in names:
                names.append(node)
        links: dict[int, str] = {}
        for row in rows:
            key = (row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
            row.nodes = sorted(nodes.get(key, []))
            row.thread_links = links


def parse_moment(text: str):
    """An aware datetime from ``2026-12-01 14:05[:00]`` or a date (its end); None if not."""
    text = text.strip().replace("T", " ")
    try:
        moment = parse_datetime(text)
        day = None if moment is not None else parse_date(text)
    except ValueError:
        return None
    if moment is None:
        if day is None:
            return None
        moment = datetime.combine(day, time.max)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment
