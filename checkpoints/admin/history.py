"""The checkpoint admin: its list (see `history_list`) and the checkpoint page: decoded
state, lineage, time travel."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import PAGE_VAR
from django.db.models.functions import Length
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from checkpoints import permissions
from checkpoints.admin import keyset, queries
from checkpoints.admin import views as admin_views
from checkpoints.admin.base import (
    ReadOnlyMixin,
    RefuseBadInputMixin,
    StoreChoiceMixin,
    checkpoint_change_url,
    history_url,
    thread_change_url,
)
from checkpoints.admin.compare import CompareView, compare_url, ordered_pair
from checkpoints.admin.display import (
    Paging,
    byte_size,
    collapsible,
    error_view,
    interrupt_view,
    json_block,
    state_view,
    unreadable_card,
    when,
)
from checkpoints.admin.filters import DurabilityFilter, ProviderFilter, SourceFilter
from checkpoints.admin.history_list import (
    JUMPS,
    THREAD_PARAM,
    HistoryChangeList,
    NamespaceFilter,
    namespace_words,
    row_metadata,
)
from checkpoints.admin.interrupts import interrupt_node
from checkpoints.admin.paging import IndexPaginator
from checkpoints.admin.store_choice import keep_store, store_alias
from checkpoints.admin.views import bad_request
from checkpoints.channels import ERROR, INTERRUPT
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput
from checkpoints.models import Checkpoint
from checkpoints.status import node_of

# The store-wide checkpoint list counts this many rows at most ("10000+ checkpoints").
COUNT_CAP = 10_000


@admin.register(Checkpoint)
class CheckpointAdmin(RefuseBadInputMixin, StoreChoiceMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "checkpoint_label",
        "thread_link",
        "namespace",
        "branch",
        "step",
        "source",
        "written_by",
        "created_seconds",
        "stored_size",
        "durability",
    )
    list_display_links = ("checkpoint_label",)
    list_filter = (SourceFilter, NamespaceFilter, DurabilityFilter, ProviderFilter)
    search_fields = ("checkpoint_id",)
    search_help_text = "Checkpoint id or thread id, exactly."
    list_select_related = ("thread",)
    list_per_page = 50
    ordering = ("-checkpoint_id",)
    show_full_result_count = False
    change_form_template = "admin/checkpoints/checkpoint/change_form.html"
    actions = ["compare_selected", "rollback_selected", "fork_selected"]
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "thread_link",
                    "checkpoint_id",
                    "checkpoint_ns",
                    "source",
                    "step",
                    "written_at",
                    "durability",
                )
            },
        ),
        ("Lineage", {"fields": ("parent_link", "fork_origin", "rollback_target", "children")}),
        ("State", {"fields": ("channel_values", "pending_writes", "metadata_view")}),
    )
    readonly_fields = (
        "thread_link",
        "checkpoint_id",
        "checkpoint_ns",
        "source",
        "step",
        "written_at",
        "durability",
        "parent_link",
        "fork_origin",
        "rollback_target",
        "children",
        "channel_values",
        "pending_writes",
        "metadata_view",
    )

    # -- permissions for the two time-travel operations ---------------------------------
    def has_rollback_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "rollback")

    def has_fork_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "fork")

    # -- queries ------------------------------------------------------------------------
    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .using(store_alias())
            .defer("checkpoint")
            .annotate(body_size=Length("checkpoint"))
        )

    def lookup_allowed(self, lookup, value, request=None):
        if lookup in JUMPS or lookup in ("thread__id__exact", "thread__thread_id"):
            return True
        return super().lookup_allowed(lookup, value, request)

    def get_changelist(self, request, **kwargs):
        return HistoryChangeList

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        # Counting a million checkpoints on every load is the slow part; a thread's history
        # is keyset-paged and counts only its own rows.
        return IndexPaginator(queryset, per_page, orphans, allow_empty_first_page, cap=COUNT_CAP)

    def get_sortable_by(self, request):
        # A thread's history is keyset-paged in checkpoint order; no other order pages.
        if THREAD_PARAM in request.GET:
            return ()
        # Store-wide, only the checkpoint id has an index of its own: sorting a million
        # checkpoints by step, source, durability or time took 1.6 s a page.
        return ("checkpoint_label",)

    @admin.display(description="checkpoint", ordering="checkpoint_id")
    def checkpoint_label(self, obj):
        if getattr(obj, "is_jump_target", False):
            return format_html('<mark class="cs-target">{}</mark>', obj.checkpoint_id)
        return obj.checkpoint_id

    @admin.display(description="namespace")
    def namespace(self, obj):
        if not obj.checkpoint_ns:
            return format_html('<span class="cs-ns cs-ns-root">{}</span>', "root")
        return format_html(
            '<span class="cs-ns" title="{}">{}</span>',
            obj.checkpoint_ns,
            getattr(obj, "call_name", None) or namespace_words(obj.checkpoint_ns),
        )

    @admin.display(description="branch")
    def branch(self, obj):
        found = getattr(obj, "branch", None)
        if found is None:
            return "—"
        return format_html(
            '<span class="cs-branch cs-branch-{}" data-branch="{}">{}</span>',
            "current" if found.current else "other",
            found.number,
            found.words,
        )

    @admin.display(description="written by")
    def written_by(self, obj):
        return ", ".join(getattr(obj, "nodes", ())) or "—"

    @admin.display(description="written", ordering="created_at")
    def created_seconds(self, obj):
        return when(obj.created_at)

    @admin.display(description="written")
    def written_at(self, obj):
        return when(obj.created_at)

    @admin.display(description="stored")
    def stored_size(self, obj):
        # The checkpoint row itself; channel values are shared blobs, sized on its page.
        return byte_size(obj.body_size)

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        by_checkpoint = queryset.filter(checkpoint_id=term)
        return by_checkpoint | queryset.filter(thread__thread_id=term), False

    def changelist_view(self, request, extra_context=None):
        extra = dict(extra_context or {})
        thread_pk = request.GET.get(THREAD_PARAM)
        if thread_pk and thread_pk.isdigit():
            thread = queries.thread_by_pk(alias=store_alias(), pk=int(thread_pk))
            if thread is not None:
                extra["title"] = f"History of thread {thread.thread_id}, newest first"
                extra["subtitle"] = None
                extra["history_thread"] = thread
                extra["history_thread_url"] = thread_change_url(thread.pk)
                # The jump form keeps every other filter; its own fields start empty.
                cursors = (*JUMPS, *keyset.CURSORS, PAGE_VAR)
                keep = [(k, v) for k, v in request.GET.items() if k not in cursors]
                extra["jump_keep"] = keep
                extra["jump_step"] = request.GET.get("step__lte", "")
                extra["jump_time"] = request.GET.get("created_at__lte", "")
                extra["jump_clear"] = urlencode(keep)
        return super().changelist_view(request, extra)

    # -- per-object views ---------------------------------------------------------------
    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        view = self.admin_site.admin_view
        return [
            path("compare/", view(CompareView(self)), name=f"{prefix}_compare"),
            path(
                "<path:object_id>/changes/",
                view(admin_views.ChangesView(self)),
                name=f"{prefix}_changes",
            ),
            path(
                "<path:object_id>/value/",
                view(admin_views.ValueDownloadView(self)),
                name=f"{prefix}_value",
            ),
            path(
                "<path:object_id>/rollback/",
                view(admin_views.RollbackView(self)),
                name=f"{prefix}_rollback",
            ),
            path(
                "<path:object_id>/fork/",
                view(admin_views.ForkView(self)),
                name=f"{prefix}_fork",
            ),
            *super().get_urls(),
        ]

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            try:
                obj.paging = Paging.of(request)
            except InvalidCheckpointInput:
                obj.paging = Paging()  # only the pages that show messages refuse it
        return obj

    def change_view(self, request, object_id, form_url="", extra_context=None):
        try:
            Paging.of(request)
        except InvalidCheckpointInput as exc:
            return bad_request(exc)
        pk = unquote(object_id)
        extra = {
            **self._neighbours(pk),
            "can_rollback": self.has_rollback_permission(request),
            "can_fork": self.has_fork_permission(request),
            "changes_url": keep_store(reverse("admin:checkpoints_checkpoint_changes", args=[pk])),
            "rollback_url": keep_store(reverse("admin:checkpoints_checkpoint_rollback", args=[pk])),
            "fork_url": keep_store(reverse("admin:checkpoints_checkpoint_fork", args=[pk])),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    def _neighbours(self, pk) -> dict[str, str]:
        """Links to the older and newer checkpoint of the same thread and namespace."""
        try:
            pk = int(pk)
        except (TypeError, ValueError):
            return {}  # no such row: the admin's own "doesn't exist" answers, not a 500
        row, older, newer = queries.neighbours(alias=store_alias(), pk=pk)
        if row is None:
            return {}
        # The history's keyset page that starts with this checkpoint.
        links = {"history_url": history_url(row["thread_id"])}
        if older is not None:
            links["older_url"] = checkpoint_change_url(older[0])
        if newer is not None:
            links["newer_url"] = checkpoint_change_url(newer[0])
            links["history_url"] += "&" + urlencode({keyset.BEFORE: newer[1]})
        parent, head = queries.parent_and_head(alias=store_alias(), row=row)
        # A is the older side of a comparison: the parent, or this checkpoint against the head.
        if parent is not None:
            links["compare_parent_url"] = compare_url(parent, pk)
        if head is not None and head != pk:
            links["compare_head_url"] = compare_url(pk, head)
        return links

    # -- list actions: each leads to the same confirmation page as the object's button ---
    def _exactly(self, request, queryset, count: int, verb: str):
        """The ``count`` selected checkpoints, or None (saying so) when another number was."""
        chosen = list(queryset[: count + 1])
        if len(chosen) != count:
            what = {1: "one checkpoint", 2: "two checkpoints"}[count]
            self.message_user(
                request,
                f"Select exactly {what} to {verb}; {queryset.count()} were selected.",
                level="error",
            )
            return None
        return chosen

    def _single(self, request, queryset, verb):
        chosen = self._exactly(request, queryset, 1, verb)
        return chosen[0] if chosen else None

    @admin.action(description="Compare the two selected checkpoints", permissions=["view"])
    def compare_selected(self, request, queryset):
        chosen = self._exactly(request, queryset, 2, "compare")
        if chosen is None:
            return None
        older, newer = ordered_pair(chosen)
        return HttpResponseRedirect(compare_url(older.pk, newer.pk))

    @admin.action(
        description="Roll back the thread to the selected checkpoint…", permissions=["rollback"]
    )
    def rollback_selected(self, request, queryset):
        target = self._single(request, queryset, "roll back to")
        if target is not None:
            return admin_views.RollbackView(self)(request, str(target.pk), from_action=True)
        return None

    @admin.action(
        description="Fork a new thread from the selected checkpoint…", permissions=["fork"]
    )
    def fork_selected(self, request, queryset):
        source = self._single(request, queryset, "fork from")
        if source is not None:
            return admin_views.ForkView(self)(request, str(source.pk), from_action=True)
        return None

    # -- decoded state, read once per page through the saver -----------------------------
    def _tuple(self, obj):
        """The decoded tuple, or None; a decoding failure is kept for ``_unreadable``."""
        if not hasattr(obj, "_saved_tuple"):
            obj._read_error = None
            try:
                obj._saved_tuple = admin_views.load_tuple(obj)
            except CheckpointStoreError as exc:
                obj._saved_tuple, obj._read_error = None, exc
        return obj._saved_tuple

    def _unreadable(self, obj):
        return unreadable_card(obj._read_error, "Cannot decode this checkpoint")

    @admin.display(description="thread")
    def thread_link(self, obj):
        # A history page names one thread 50 times: the page's rows share one cache
        # (set by the list), so its links are built once.
        cache = getattr(obj, "thread_links", {})
        if obj.thread_id not in cache:
            cache[obj.thread_id] = format_html(
                '<a href="{}">{}</a> · <a href="{}">history</a>',
                thread_change_url(obj.thread_id),
                obj.thread.thread_id,
                history_url(obj.thread_id),
            )
        return cache[obj.thread_id]

    @admin.display(description="parent")
    def parent_link(self, obj):
        if not obj.parent_checkpoint_id:
            return "— (first checkpoint of the thread)"
        parent = admin_views.find_checkpoint(
            obj.thread.thread_id, obj.parent_checkpoint_id, obj.checkpoint_ns
        )
        if parent is None:
            return f"{obj.parent_checkpoint_id} (no longer stored)"
        return format_html(
            '<a href="{}">{}</a> · <a href="{}">what this checkpoint changed</a>',
            checkpoint_change_url(parent.pk),
            obj.parent_checkpoint_id,
            keep_store(reverse("admin:checkpoints_checkpoint_changes", args=[obj.pk])),
        )

    @admin.display(description="forked from")
    def fork_origin(self, obj):
        origin = row_metadata(obj).get("forked_from")
        if not isinstance(origin, dict):
            return "—"
        return admin_views.checkpoint_link(
            str(origin.get("thread_id", "")), str(origin.get("checkpoint_id", ""))
        )

    @admin.display(description="rolled back to")
    def rollback_target(self, obj):
        info = row_metadata(obj).get("rollback")
        if not isinstance(info, dict):
            return "—"
        thread_id = obj.thread.thread_id
        return format_html(
            "target {} · replaced head {}",
            admin_views.checkpoint_link(thread_id, str(info.get("target", ""))),
            admin_views.checkpoint_link(thread_id, str(info.get("replaced_head", ""))),
        )

    @admin.display(description="forks and children")
    def children(self, obj):
        rows = queries.children_of(alias=store_alias(), row=obj)
        if not rows:
            return "—"
        return format_html_join(
            ", ",
            '<a href="{}">{}{}</a>',
            (
                (checkpoint_change_url(pk), cid, f" (thread {tid})" if tid else "")
                for pk, cid, tid in rows
            ),
        )

    @admin.display(description="channel values")
    def channel_values(self, obj):
        saved = self._tuple(obj)
        if obj._read_error is not None:
            return self._unreadable(obj)
        if saved is None:
            return "the saver holds no such checkpoint"
        values = saved.checkpoint.get("channel_values") or {}
        return state_view(
            values,
            self._sizes(obj),
            getattr(obj, "paging", None),
            download=lambda channel: admin_views.value_url(obj.pk, channel=channel),
        )

    def _sizes(self, obj) -> dict[str, int]:
        """Stored bytes of each channel's value at this checkpoint (after compression)."""
        versions = {c: str(v) for c, v in (obj.channel_versions or {}).items()}
        return queries.channel_sizes(
            alias=store_alias(), thread_pk=obj.thread_id, ns=obj.checkpoint_ns, versions=versions
        )

    @admin.display(description="pending writes")
    def pending_writes(self, obj):
        saved = self._tuple(obj)
        if obj._read_error is not None:
            return "— (see the channel values: this checkpoint cannot be decoded)"
        writes = (saved.pending_writes or []) if saved is not None else []
        if not writes:
            return "—"
        paths = queries.task_paths(
            alias=store_alias(),
            thread_pk=obj.thread_id,
            checkpoint_id=obj.checkpoint_id,
            ns=obj.checkpoint_ns,
        )
        return format_html_join(
            "",
            "{}",
            (
                (self._write(obj, n, task_id, channel, value, paths),)
                for n, (task_id, channel, value) in enumerate(writes)
            ),
        )

    def _write(self, obj, n: int, task_id: str, channel: str, value, paths: dict[str, str]):
        """One pending write: an interrupt or an error in words, anything else as JSON."""
        node = node_of(paths.get(task_id, ""))
        if channel == INTERRUPT:
            asker = interrupt_node(obj.thread_id, obj.checkpoint_ns, task_id, node)
            return interrupt_view(value, asker)
        if channel == ERROR:
            return error_view(value, node)
        return collapsible(
            f"{channel} ← {node or 'task ' + task_id}",
            value,
            download=admin_views.value_url(obj.pk, write=n),
        )

    @admin.display(description="metadata")
    def metadata_view(self, obj):
        return json_block(obj.metadata or {})
