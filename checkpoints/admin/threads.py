"""The thread list and thread page: status at a glance, lineage, the checkpoint tree."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.utils.html import format_html, format_html_join

from checkpoints import selectors, status
from checkpoints.admin import tree as admin_tree
from checkpoints.admin import views as admin_views
from checkpoints.admin.base import (
    HEAD_ROWS,
    ReadOnlyMixin,
    RefuseBadInputMixin,
    StoreChoiceMixin,
    checkpoint_change_url,
    history_url,
    thread_change_url,
)
from checkpoints.admin.filters import FinishedFilter, ProviderFilter, StatusFilter
from checkpoints.admin.paging import IndexPaginator
from checkpoints.admin.store_choice import store_alias, store_saver
from checkpoints.channels import ERROR, INTERRUPT
from checkpoints.errors import CheckpointStoreError
from checkpoints.models import Thread
from checkpoints.selectors import unindexed
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from checkpoints.timetravel import TimeTravel


def question_of(value) -> str:
    """The question an interrupt write asks (its first Interrupt's value), shortened."""
    first = value[0] if isinstance(value, (list, tuple)) and value else value
    return str(getattr(first, "value", first))[:300]


class ThreadChangeList(ChangeList):
    """The thread list, with the waiting rows' interrupt questions read for the page."""

    # Ties in the chosen column's direction: an index on (column, last write, id) then
    # serves the list both ways (Django would break ties newest first whatever the
    # direction, and PostgreSQL would sort every thread: 89 ms by owner at 100,000).
    TIE_BREAKS = ("last_write_at", "id")

    # Filters that keep few threads, and old ones (see selectors.unindexed).
    FEW = (("state", "finished"), ("status", "finished"))

    def get_ordering(self, request, queryset):
        ordering = super().get_ordering(request, queryset)
        first = ordering[0] if ordering else None
        if isinstance(first, str) and first.lstrip("-") in ("owner", "last_write_at"):
            sign = "-" if first.startswith("-") else ""
            name = first.lstrip("-")
            ordering = [first, *(sign + f for f in self.TIE_BREAKS if f != name)]
            if name == "last_write_at" and any(self.params.get(k) == v for k, v in self.FEW):
                by = unindexed(name)
                ordering[0] = by.desc() if sign else by.asc()
        return ordering

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        self.model_admin.read_questions(self.result_list)


@admin.register(Thread)
class ThreadAdmin(RefuseBadInputMixin, StoreChoiceMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "thread_id",
        "status",
        "owner",
        "last_write_seconds",
        "checkpoint_count",
        "due_at",
        "declared_retention",
    )
    list_filter = [
        StatusFilter,
        ("owner", admin.RelatedFieldListFilter),
        FinishedFilter,
        ProviderFilter,
    ]
    search_fields = ("thread_id",)
    search_help_text = "Thread id, exactly or its beginning."
    list_select_related = ("owner",)
    list_per_page = 50
    ordering = ("-last_write_at", "-id")
    # A COUNT(*) over a million-row table on every page load is the slow part; skip it.
    show_full_result_count = False
    change_form_template = "admin/checkpoints/thread/change_form.html"
    change_list_template = "admin/checkpoints/thread/change_list.html"
    fields = (
        "thread_id",
        "status_detail",
        "owner",
        "created_at",
        "last_write_at",
        "version",
        "declared_retention",
        "finished_state",
        "due_at",
        "lineage",
        "checkpoint_tree",
        "recent_checkpoints",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        rows = super().get_queryset(request).using(store_alias())
        return status.with_status_facts(selectors.with_checkpoint_count(rows))

    def park_deadline(self, obj):
        """The thread's live park deadline; retention's admin knows parks."""
        return None

    def get_changelist(self, request, **kwargs):
        return ThreadChangeList

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        return IndexPaginator(queryset, per_page, orphans, allow_empty_first_page)

    def read_questions(self, rows) -> None:
        """Each waiting row's interrupt question and node, from its head's writes at once."""
        waiting = {r.pk: r for r in rows if r.has_interrupt and not r.has_resume}
        if not waiting:
            return
        heads = {pk: row.head_id for pk, row in waiting.items()}
        writes = selectors.head_writes(alias=store_alias(), heads=heads, channel=INTERRUPT)
        saver = store_saver()
        for thread_pk, task_id, idx, task_path, type_, blob in writes:
            row = waiting[thread_pk]
            if hasattr(row, "question"):
                continue
            try:
                value = saver.decode_write(
                    row.thread_id, "", row.head_id, task_id, idx, INTERRUPT, type_, blob
                )
            except CheckpointStoreError:
                continue  # the page shows "an interrupt"; the thread page names the failure
            row.question = question_of(value)
            row.node = status.node_of(task_path)

    def head_details(self, obj) -> dict[str, str]:
        """The interrupt's question and node, or the error, read from the head's writes."""
        if not (obj.has_interrupt or obj.has_error):
            return {}
        try:
            head = store_saver().get_tuple({"configurable": {"thread_id": obj.thread_id}})
        except CheckpointStoreError as exc:
            return {"error": f"cannot read the head checkpoint: {exc}"}
        paths = selectors.task_paths(
            alias=store_alias(), thread_pk=obj.pk, checkpoint_id=obj.head_id
        )
        found: dict[str, str] = {}
        for task_id, channel, value in (head.pending_writes if head else []) or []:
            if channel == INTERRUPT and "question" not in found:
                found["question"] = question_of(value)
                found["node"] = status.node_of(paths.get(task_id, ""))
            elif channel == ERROR and "error" not in found:
                found["error"] = str(value)[:300]
        return found

    def status_of(self, obj, *, detailed: bool) -> status.ThreadStatus:
        if detailed:
            details = self.head_details(obj)
        else:
            # The list read the waiting rows' questions for the whole page (read_questions).
            details = {"question": getattr(obj, "question", ""), "node": getattr(obj, "node", "")}
        return status.row_status(
            obj,
            now=utcnow(),
            park_deadline=self.park_deadline(obj),
            question=details.get("question", ""),
            node=details.get("node", ""),
            error=details.get("error", ""),
        )

    def _status_html(self, found: status.ThreadStatus):
        return format_html(
            '<span class="cs-status cs-status-{}">{}</span> <span class="cs-muted">{}</span>',
            found.kind,
            found.label,
            found.detail,
        )

    @admin.display(description="status")
    def status(self, obj):
        return self._status_html(self.status_of(obj, detailed=False))

    @admin.display(description="status")
    def status_detail(self, obj):
        # The thread page also reads the interrupt's question and node, or the error.
        return self._status_html(self.status_of(obj, detailed=True))

    @admin.display(description="last write", ordering="last_write_at")
    def last_write_seconds(self, obj):
        return f"{obj.last_write_at:%Y-%m-%d %H:%M:%S %Z}"

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        # Exact and prefix matches keep to the unique index; a substring scan would not.
        return queryset.filter(thread_id__startswith=term), False

    @admin.display(description="checkpoints")
    def checkpoint_count(self, obj):
        return format_html('<a href="{}">{}</a>', history_url(obj.pk), obj.checkpoint_count)

    @admin.display(description="finished", boolean=True)
    def finished_state(self, obj):
        return obj.finished_due_at is not None

    @admin.display(description="due at")
    def due_at(self, obj):
        if obj.finished_due_at is None:
            return "—"
        owner = f" (marked by {obj.finished_owner})" if obj.finished_owner else ""
        return f"{obj.finished_due_at:%Y-%m-%d %H:%M:%S %Z}{owner}"

    @admin.display(description="declared retention")
    def declared_retention(self, obj):
        if obj.waiting_minutes is None and obj.finished_minutes is None:
            return "platform default"
        waiting = obj.waiting_minutes if obj.waiting_minutes is not None else "default"
        finished = obj.finished_minutes if obj.finished_minutes is not None else "default"
        return f"waiting {waiting} min, finished {finished} min"

    @admin.display(description="lineage (forked from)")
    def lineage(self, obj):
        try:
            steps = TimeTravel(store_saver()).lineage(obj.thread_id)
        except CheckpointStoreError as exc:
            return f"unavailable: {exc}"
        if len(steps) < 2:
            return "an original thread (not a fork)"
        return format_html_join(
            " ← ",
            "{}",
            ((admin_views.checkpoint_link(s["thread_id"], s["checkpoint_id"]),) for s in steps),
        )

    @admin.display(description="checkpoint tree")
    def checkpoint_tree(self, obj):
        drawn = []
        windows = selectors.checkpoint_windows(
            alias=store_alias(), thread_pk=obj.pk, window=admin_tree.WINDOW
        )
        for ns, rows, truncated in windows:
            # Forks start from the root namespace only.
            forks = [
                (origin, tid, thread_change_url(pk))
                for origin, pk, tid in (
                    [] if ns else selectors.forks_from(alias=store_alias(), thread_id=obj.thread_id)
                )
            ]
            title = f"namespace {ns}" if ns else "root namespace"
            drawn.append(
                format_html(
                    '<div class="cs-tree-ns"><strong>{}</strong>{}</div>',
                    title,
                    admin_tree.draw(
                        [admin_tree.Node(*row) for row in rows],
                        head_id=rows[0][1] if rows else None,
                        link=checkpoint_change_url,
                        label=f"checkpoints of thread {obj.thread_id}, {title}",
                        truncated=truncated,
                        forks=forks,
                    ),
                )
            )
        return format_html_join("", "{}", ((d,) for d in drawn)) if drawn else "no checkpoints"

    @admin.display(description="newest checkpoints")
    def recent_checkpoints(self, obj):
        rows = selectors.newest_checkpoints(alias=store_alias(), thread_pk=obj.pk, limit=HEAD_ROWS)
        if not rows:
            return "no checkpoints"
        body = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (checkpoint_change_url(pk), cid, source or "—", step, created)
                for pk, cid, source, step, created in rows
            ),
        )
        return format_html(
            '<table class="cs-table"><thead><tr><th>checkpoint</th><th>source</th>'
            "<th>step</th><th>written</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">Full history ({})</a></p>',
            body,
            history_url(obj.pk),
            obj.checkpoint_count,
        )

    def changelist_view(self, request, extra_context=None):
        provider = get_saver().provider
        if provider not in ("postgres", "sqlite"):
            # Only the ORM providers keep these tables; say so instead of an empty page.
            self.message_user(
                request,
                f"This deployment keeps its checkpoints in {provider}; the thread list reads "
                "the database tables of the postgres and sqlite stores, so it shows none of "
                "them. The sweep page still works on this store.",
                messages.WARNING,
            )
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {"history_url": history_url(object_id), **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra)
