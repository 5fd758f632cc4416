"""Admin console for the checkpoint store: threads, checkpoints, changes, rollback and fork.

Lists come from the ORM tables (fast, indexed); decoded values come from the saver of the
same store (`store_saver().get_tuple`), so the admin shows exactly what a graph would load.
The store is the deployment's own unless the provider filter names another ORM database;
every link then carries that choice, so no page mixes rows of two databases. Every
page here is read-only; rollback and fork go through a confirmation page and a POST.
Retention (marks, parks, the sweep) is added by `retention/admin.py`, which imports this
module, never the reverse.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, Length
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from checkpoints import admin_tree, admin_views, status
from checkpoints.admin_display import byte_size, collapsible, json_block, state_view
from checkpoints.admin_views import keep_store, store_alias, store_choices, store_saver
from checkpoints.conf import setting
from checkpoints.errors import CheckpointStoreError
from checkpoints.models import (
    AuditEvent,
    ChannelBlob,
    Checkpoint,
    FinishedMark,
    PendingWrite,
    Thread,
)
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from checkpoints.timetravel import TimeTravel

HEAD_ROWS = 10


def thread_change_url(thread_pk: int) -> str:
    return keep_store(reverse("admin:checkpoints_thread_change", args=[thread_pk]))


def checkpoint_change_url(checkpoint_pk: int) -> str:
    return keep_store(reverse("admin:checkpoints_checkpoint_change", args=[checkpoint_pk]))


def history_url(thread_pk: int) -> str:
    url = reverse("admin:checkpoints_checkpoint_changelist") + f"?thread__id__exact={thread_pk}"
    return keep_store(url, changelist=True)


class ProviderFilter(admin.SimpleListFilter):
    """Which ORM checkpoint store the list reads; the deployment's own when none is chosen.

    The rows of two databases cannot be listed as one, so there is no "All" choice. The
    query itself is switched by `admin_views.with_store_choice`; this filter offers the
    stores and refuses an unknown one (Django answers that with its invalid-filter page).
    """

    title = "provider"
    parameter_name = admin_views.PROVIDER_PARAM

    def lookups(self, request, model_admin):
        return store_choices()

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value not in dict(self.lookup_choices):
            known = ", ".join(alias for alias, _ in self.lookup_choices)
            raise IncorrectLookupParameters(
                f"checkpoint store {value!r} is not available; choose one of {known}"
            )
        return queryset.using(value)

    def choices(self, changelist):
        current = self.value() or store_alias()
        for alias, label in self.lookup_choices:
            yield {
                "selected": alias == current,
                "query_string": changelist.get_query_string({self.parameter_name: alias}),
                "display": label,
            }

    def get_facet_counts(self, pk_attname, filtered_qs):
        # Counting across databases would need a cross-database subquery; show none.
        return {}


class StoreChoiceMixin:
    """Every page of this admin reads the store the request names (see `ProviderFilter`)."""

    def changelist_view(self, request, extra_context=None):
        named = request.GET.get(admin_views.PROVIDER_PARAM)
        choices = dict(store_choices())
        if named is not None and named not in choices:
            # Django would quietly drop the bad filter and show the default store.
            self.message_user(
                request,
                f"There is no checkpoint store {named!r} in this admin; choose one of "
                f"{', '.join(choices)}. Showing the deployment's own store instead.",
                messages.ERROR,
            )
            query = request.GET.copy()
            del query[admin_views.PROVIDER_PARAM]
            return HttpResponseRedirect(f"{request.path}?{query.urlencode()}")
        return super().changelist_view(request, extra_context)

    @property
    def urls(self):
        # Wrapped here, not in get_urls, so the views subclasses add are covered too.
        changelist = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        urls = self.get_urls()
        for pattern in urls:
            if hasattr(pattern, "callback"):
                pattern.callback = admin_views.with_store_choice(
                    pattern.callback, lenient=pattern.name == changelist
                )
        return urls


class FinishedFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("finished", "Finished (marked)"), ("waiting", "Waiting (not marked)")]

    def queryset(self, request, queryset):
        marked = Exists(FinishedMark.objects.filter(thread_id=OuterRef("thread_id")))
        if self.value() == "finished":
            return queryset.filter(marked)
        if self.value() == "waiting":
            return queryset.filter(~marked)
        return queryset


class StatusFilter(admin.SimpleListFilter):
    """Filter by the status column's rule (checkpoints/status.py), in the same order."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [(kind, label) for kind, label in status.KINDS.items() if kind != "parked"]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        now = utcnow()
        marked = Exists(FinishedMark.objects.filter(thread_id=OuterRef("thread_id")))
        waiting = Q(has_interrupt=True, has_resume=False)
        recent = Q(last_write_at__gte=now - status.RECENT)
        rules = {
            "finished": Q(marked),
            "waiting_on_human": ~Q(marked) & waiting,
            "failed": ~Q(marked) & ~waiting & Q(has_error=True),
            "recent": ~Q(marked) & ~waiting & Q(has_error=False) & recent,
            "idle": ~Q(marked) & ~waiting & Q(has_error=False) & ~recent,
        }
        if value not in rules:
            raise IncorrectLookupParameters(f"status {value!r} is not one of {', '.join(rules)}")
        return queryset.filter(rules[value])


class ReadOnlyMixin:
    """Pages to read, not forms to edit: the store's own operations are the only writers."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting is the sweep's job: it asks the live-thread filters first.
        return False


@admin.register(Thread)
class ThreadAdmin(StoreChoiceMixin, ReadOnlyMixin, admin.ModelAdmin):
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
    ordering = ("-last_write_at",)
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
        count = (
            Checkpoint.objects.filter(thread=OuterRef("pk"))
            .order_by()
            .values("thread")
            .annotate(n=Count("pk"))
            .values("n")
        )
        mark = FinishedMark.objects.filter(thread_id=OuterRef("thread_id"))
        head = (
            Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="")
            .order_by("-checkpoint_id")
            .values("checkpoint_id")[:1]
        )

        def head_writes(channel: str) -> Exists:
            return Exists(
                PendingWrite.objects.filter(
                    thread=OuterRef("pk"),
                    checkpoint_ns="",
                    checkpoint_id=OuterRef("head_id"),
                    channel=channel,
                )
            )

        return (
            super()
            .get_queryset(request)
            .using(store_alias())
            .annotate(
                # Correlated per page row: answered from the (thread, ns, checkpoint_id)
                # index, so the cost follows the page size, not the table size.
                checkpoint_count=Coalesce(Subquery(count, output_field=IntegerField()), 0),
                mark_due=Subquery(mark.values("due_at")[:1]),
                mark_owner=Subquery(mark.values("owner")[:1]),
                head_id=Subquery(head),
            )
            .annotate(
                has_interrupt=head_writes(status.INTERRUPT),
                has_resume=head_writes(status.RESUME),
                has_error=head_writes(status.ERROR),
            )
        )

    def park_deadline(self, obj):
        """The thread's live park deadline; retention's admin knows parks."""
        return None

    def head_details(self, obj) -> dict[str, str]:
        """The interrupt's question and node, or the error, read from the head's writes."""
        if not (obj.has_interrupt or obj.has_error):
            return {}
        try:
            head = store_saver().get_tuple({"configurable": {"thread_id": obj.thread_id}})
        except CheckpointStoreError as exc:
            return {"error": f"cannot read the head checkpoint: {exc}"}
        paths = dict(
            PendingWrite.objects.using(store_alias())
            .filter(thread=obj, checkpoint_ns="", checkpoint_id=obj.head_id)
            .values_list("task_id", "task_path")
        )
        found: dict[str, str] = {}
        for task_id, channel, value in (head.pending_writes if head else []) or []:
            if channel == status.INTERRUPT and "question" not in found:
                first = value[0] if isinstance(value, (list, tuple)) and value else value
                found["question"] = str(getattr(first, "value", first))[:300]
                found["node"] = status.node_of(paths.get(task_id, ""))
            elif channel == status.ERROR and "error" not in found:
                found["error"] = str(value)[:300]
        return found

    def status_of(self, obj, *, detailed: bool) -> status.ThreadStatus:
        details = self.head_details(obj) if detailed else {}
        return status.thread_status(
            now=utcnow(),
            last_write_at=obj.last_write_at,
            waiting_minutes=obj.waiting_minutes or setting("RETENTION_WAITING_MINUTES"),
            mark_due=obj.mark_due,
            park_deadline=self.park_deadline(obj),
            interrupted=obj.has_interrupt and not obj.has_resume,
            question=details.get("question", ""),
            node=details.get("node", ""),
            error=details.get("error") or ("the last task failed" if obj.has_error else ""),
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
        return obj.mark_due is not None

    @admin.display(description="due at")
    def due_at(self, obj):
        if obj.mark_due is None:
            return "—"
        owner = f" (marked by {obj.mark_owner})" if obj.mark_owner else ""
        return f"{obj.mark_due:%Y-%m-%d %H:%M:%S %Z}{owner}"

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
        checkpoints = Checkpoint.objects.using(store_alias()).filter(thread=obj)
        namespaces = sorted(
            set(checkpoints.order_by().values_list("checkpoint_ns", flat=True).distinct())
        )
        drawn = []
        for ns in namespaces:
            rows = list(
                checkpoints.filter(checkpoint_ns=ns)
                .order_by("-checkpoint_id")
                .values_list("pk", "checkpoint_id", "parent_checkpoint_id", "source", "step")[
                    : admin_tree.WINDOW + 1
                ]
            )
            truncated = 0
            if len(rows) > admin_tree.WINDOW:
                rows = rows[: admin_tree.WINDOW]
                truncated = checkpoints.filter(checkpoint_ns=ns).count() - admin_tree.WINDOW
            nodes = [admin_tree.Node(*row) for row in rows]
            title = f"namespace {ns}" if ns else "root namespace"
            drawn.append(
                format_html(
                    '<div class="cs-tree-ns"><strong>{}</strong>{}</div>',
                    title,
                    admin_tree.draw(
                        nodes,
                        head_id=rows[0][1] if rows else None,
                        link=checkpoint_change_url,
                        label=f"checkpoints of thread {obj.thread_id}, {title}",
                        truncated=truncated,
                    ),
                )
            )
        return format_html_join("", "{}", ((d,) for d in drawn)) if drawn else "no checkpoints"

    @admin.display(description="newest checkpoints")
    def recent_checkpoints(self, obj):
        rows = list(
            Checkpoint.objects.using(store_alias())
            .filter(thread=obj)
            .order_by("-checkpoint_id")
            .values_list("pk", "checkpoint_id", "source", "step", "created_at")[:HEAD_ROWS]
        )
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


# Query parameters the history's "jump to" form sends (see change_list.html).
JUMPS = ("step__lte", "created_at__lte")


class HistoryChangeList(ChangeList):
    """The checkpoint list, with the node(s) that wrote each row read for the page at once."""

    def get_results(self, request):
        super().get_results(request)
        rows = list(self.result_list)
        parents = {(r.thread_id, r.checkpoint_ns, r.parent_checkpoint_id) for r in rows}
        parents = {p for p in parents if p[2]}
        nodes: dict[tuple, list[str]] = {}
        if parents:
            wanted = Q()
            for thread_pk, ns, checkpoint_id in parents:
                wanted |= Q(thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
            found = (
                PendingWrite.objects.using(store_alias())
                .filter(wanted)
                .values_list("thread_id", "checkpoint_ns", "checkpoint_id", "task_path")
                .distinct()
            )
            for thread_pk, ns, checkpoint_id, task_path in found:
                node = status.node_of(task_path)
                names = nodes.setdefault((thread_pk, ns, checkpoint_id), [])
                if node and node not in names:
                    names.append(node)
        for row in rows:
            key = (row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
            row.nodes = sorted(nodes.get(key, []))


@admin.register(Checkpoint)
class CheckpointAdmin(StoreChoiceMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "checkpoint_id",
        "thread_link",
        "step",
        "source",
        "written_by",
        "created_seconds",
        "stored_size",
        "durability",
    )
    list_display_links = ("checkpoint_id",)
    list_filter = ("source", "durability", ProviderFilter)
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
        return request.user.has_perm("checkpoints.change_checkpoint")

    def has_fork_permission(self, request, obj=None):
        return request.user.has_perm("checkpoints.add_checkpoint")

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
        thread_pk = request.GET.get("thread__id__exact")
        if thread_pk and thread_pk.isdigit():
            thread = Thread.objects.using(store_alias()).filter(pk=int(thread_pk)).first()
            if thread is not None:
                extra["title"] = f"History of thread {thread.thread_id}, newest first"
                extra["subtitle"] = None
                extra["history_thread"] = thread
                extra["history_thread_url"] = thread_change_url(thread.pk)
                # The jump form keeps every other filter; its own fields start empty.
                keep = [(k, v) for k, v in request.GET.items() if k not in (*JUMPS, "p")]
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

    def change_view(self, request, object_id, form_url="", extra_context=None):
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
        older = (
            same.filter(checkpoint_id__lt=row["checkpoint_id"])
            .order_by("-checkpoint_id")
            .values_list("pk", flat=True)
            .first()
        )
        newer = (
            same.filter(checkpoint_id__gt=row["checkpoint_id"])
            .order_by("checkpoint_id")
            .values_list("pk", flat=True)
            .first()
        )
        links = {"history_url": history_url(row["thread_id"])}
        if older is not None:
            links["older_url"] = checkpoint_change_url(older)
        if newer is not None:
            links["newer_url"] = checkpoint_change_url(newer)
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
        return format_html(
            '<a href="{}">{}</a> · <a href="{}">history</a>',
            thread_change_url(obj.thread_id),
            obj.thread.thread_id,
            history_url(obj.thread_id),
        )

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
        return state_view(saved.checkpoint.get("channel_values") or {}, self._sizes(obj))

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


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """The audit trail, newest first: every change from admin, API, command or task."""

    list_display = ("at_seconds", "action", "thread_id", "actor", "origin", "remote_addr")
    list_filter = ("action", "origin", "provider")
    search_fields = ("thread_id", "actor")
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
    date_hierarchy = "at"

    @admin.display(description="when", ordering="at")
    def at_seconds(self, obj):
        return obj.at.strftime("%Y-%m-%d %H:%M:%S")
