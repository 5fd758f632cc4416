"""Checkpoint history and the checkpoint page: decoded state, lineage, time travel."""

from __future__ import annotations

from datetime import UTC, datetime, time
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ORDER_VAR, PAGE_VAR, ChangeList
from django.db.models import Q
from django.db.models.functions import Length
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.html import format_html, format_html_join

from checkpoints import permissions, status
from checkpoints.admin import keyset
from checkpoints.admin import views as admin_views
from checkpoints.admin.base import (
    ReadOnlyMixin,
    RefuseBadInputMixin,
    StoreChoiceMixin,
    checkpoint_change_url,
    history_url,
    thread_change_url,
)
from checkpoints.admin.display import Paging, byte_size, collapsible, json_block, state_view
from checkpoints.admin.filters import DurabilityFilter, ProviderFilter, SourceFilter
from checkpoints.admin.paging import IndexPaginator
from checkpoints.admin.views import bad_request, keep_store, store_alias
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput
from checkpoints.models import (
    ChannelBlob,
    Checkpoint,
    PendingWrite,
    Thread,
)

# Query parameters the history's "jump to" form sends (see change_list.html).
JUMPS = ("step__lte", "created_at__lte")
THREAD_PARAM = "thread__id__exact"
# The store-wide checkpoint list counts this many rows at most ("10000+ checkpoints").
COUNT_CAP = 10_000


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
        if parents:
            # One IN list per (thread, namespace): a history page is one of each, where an OR
            # of 50 (thread, namespace, id) triples cost more to build than to run.
            by_place: dict[tuple, set[str]] = {}
            for thread_pk, ns, checkpoint_id in parents:
                by_place.setdefault((thread_pk, ns), set()).add(checkpoint_id)
            wanted = Q()
            for (thread_pk, ns), ids in by_place.items():
                wanted |= Q(thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id__in=sorted(ids))
            found = (
                PendingWrite.objects.using(store_alias())
                .filter(wanted)
                .values_list("thread_id", "checkpoint_ns", "checkpoint_id", "task_path")
            )
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


@admin.register(Checkpoint)
class CheckpointAdmin(RefuseBadInputMixin, StoreChoiceMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "checkpoint_label",
        "thread_link",
        "step",
        "source",
        "written_by",
        "created_seconds",
        "stored_size",
        "durability",
    )
    list_display_links = ("checkpoint_label",)
    list_filter = (SourceFilter, DurabilityFilter, ProviderFilter)
    search_fields = ("checkpoint_id",)
    search_help_text = "Checkpoint id or thread id, exactly."
    list_select_related = ("thread",)
    list_per_page = 50
    ordering = ("-checkpoint_id",)
    show_full_result_count = False
    change_form_template = "admin/checkpoints/checkpoint/change_form.html"
    actions = ["rollback_selected", "fork_selected"]
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
                    "created_at",
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
        "created_at",
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

    @admin.display(description="written by")
    def written_by(self, obj):
        return ", ".join(getattr(obj, "nodes", ())) or "—"

    @admin.display(description="written", ordering="created_at")
    def created_seconds(self, obj):
        return f"{obj.created_at:%Y-%m-%d %H:%M:%S %Z}"

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
            thread = Thread.objects.using(store_alias()).filter(pk=int(thread_pk)).first()
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
            path(
                "<path:object_id>/changes/",
                view(admin_views.ChangesView(self)),
                name=f"{prefix}_changes",
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
        row = (
            Checkpoint.objects.using(store_alias())
            .filter(pk=pk)
            .values("thread_id", "checkpoint_ns", "checkpoint_id")
            .first()
        )
        if row is None:
            return {}
        same = Checkpoint.objects.using(store_alias()).filter(
            thread_id=row["thread_id"], checkpoint_ns=row["checkpoint_ns"]
        )

        def nearest(lookup: str, order: str):
            near = same.filter(**{f"checkpoint_id__{lookup}": row["checkpoint_id"]})
            return near.order_by(order).values_list("pk", "checkpoint_id").first()

        older, newer = nearest("lt", "-checkpoint_id"), nearest("gt", "checkpoint_id")
        # The history's keyset page that starts with this checkpoint.
        links = {"history_url": history_url(row["thread_id"])}
        if older is not None:
            links["older_url"] = checkpoint_change_url(older[0])
        if newer is not None:
            links["newer_url"] = checkpoint_change_url(newer[0])
            links["history_url"] += "&" + urlencode({keyset.BEFORE: newer[1]})
        return links

    # -- list actions: each leads to the same confirmation page as the object's button ---
    def _single(self, request, queryset, verb):
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(
                request,
                f"Select exactly one checkpoint to {verb}; {queryset.count()} were selected.",
                level="error",
            )
            return None
        return chosen[0]

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
        return format_html(
            '<div class="cs-card cs-unreadable"><strong>Cannot decode this checkpoint</strong>'
            '<p><code>{}</code>: {}</p><p class="cs-muted">The rows are left as they are; '
            "metadata and lineage above are still accurate.</p></div>",
            obj._read_error.code,
            obj._read_error.message,
        )

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
        origin = (obj.metadata or {}).get("forked_from")
        if not isinstance(origin, dict):
            return "—"
        return admin_views.checkpoint_link(
            str(origin.get("thread_id", "")), str(origin.get("checkpoint_id", ""))
        )

    @admin.display(description="rolled back to")
    def rollback_target(self, obj):
        info = (obj.metadata or {}).get("rollback")
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
        rows = admin_views.children_of(obj)
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
        return state_view(values, self._sizes(obj), getattr(obj, "paging", None))

    def _sizes(self, obj) -> dict[str, int]:
        """Stored bytes of each channel's value at this checkpoint (after compression)."""
        versions = {c: str(v) for c, v in (obj.channel_versions or {}).items()}
        if not versions:
            return {}
        wanted = Q()
        for channel, version in versions.items():
            wanted |= Q(channel=channel, version=version)
        rows = (
            ChannelBlob.objects.using(store_alias())
            .filter(wanted, thread_id=obj.thread_id, checkpoint_ns=obj.checkpoint_ns)
            .annotate(size=Length("blob"))
            .values_list("channel", "size")
        )
        return {channel: size or 0 for channel, size in rows}

    @admin.display(description="pending writes")
    def pending_writes(self, obj):
        saved = self._tuple(obj)
        if obj._read_error is not None:
            return "— (see the channel values: this checkpoint cannot be decoded)"
        writes = (saved.pending_writes or []) if saved is not None else []
        if not writes:
            return "—"
        return format_html_join(
            "",
            "{}",
            (
                (collapsible(f"{channel} ← task {task_id}", value),)
                for task_id, channel, value in writes
            ),
        )

    @admin.display(description="metadata")
    def metadata_view(self, obj):
        return json_block(obj.metadata or {})
