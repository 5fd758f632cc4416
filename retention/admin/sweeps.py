"""Sweep runs: the sweep page (dry run, then sweep) and each run's record with its ids."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Count
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import ngettext

from checkpoints import audit, permissions, selectors, status
from checkpoints.admin import queries
from checkpoints.admin.base import RefuseBadInputMixin
from checkpoints.admin.display import when
from checkpoints.admin.filters import ProviderNameFilter
from checkpoints.admin.refusals import refused
from checkpoints.admin.store_choice import keep_store, store_alias
from checkpoints.errors import CheckpointStoreError
from checkpoints.status import AmongValues
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.admin.links import ReadMostly, thread_link
from retention.errors import SweepAlreadyRunning
from retention.management.commands.compact_checkpoint_store import (
    summary as compaction_summary,
)
from retention.models import DeletedThread, SparedThread, SweepBatch, SweepRun
from retention.sweep import compact_store
from retention.sweep import sweep_checkpoints as run_sweep

# Deleted ids shown per page of a sweep run's page.
DELETED_PAGE = 100
# Rows per page of the sweep preview, and what it sorts by.
PREVIEW_PAGE = 100
# "order": the order the sweep deletes them in (the run's record keeps that order).
SORTS = ("order", "thread", "owner", "last_write", "status", "why")


class RecordInline(admin.TabularInline):
    """A sweep run's records: written by the sweep only, never added or edited here."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class SparedThreadInline(RecordInline):
    model = SparedThread
    fields = ("thread", "horizon", "owner", "reason")
    readonly_fields = fields

    @admin.display(description="thread")
    def thread(self, obj):
        return thread_link(obj.thread_id)


class SweepBatchInline(RecordInline):
    """A fanned-out run's batches: where each ran, its attempts, what it did, its error."""

    model = SweepBatch
    fields = (
        "index",
        "status",
        "attempts",
        "worker",
        "thread_count",
        "deleted",
        "spared",
        "error",
        "finished_at",
    )
    readonly_fields = fields


@admin.register(SweepRun)
class SweepRunAdmin(RefuseBadInputMixin, ReadMostly, admin.ModelAdmin):
    list_display = (
        "started_at",
        "status",
        "provider",
        "swept_count",
        "finished_swept",
        "waiting_swept",
        "spared_count",
        "skipped",
        "failed",
        "triggered_by",
    )
    list_filter = (ProviderNameFilter,)
    list_per_page = 50
    inlines = [SweepBatchInline, SparedThreadInline]
    change_list_template = "admin/retention/sweeprun/change_list.html"
    change_form_template = "admin/retention/sweeprun/change_form.html"
    readonly_fields = SweepRun.RESULT_FIELDS

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(spared_total=Count("spared"))

    @admin.display(description="spared", ordering="spared_total")
    def spared_count(self, obj):
        return obj.spared_total

    @admin.display(description="failed", boolean=True)
    def failed(self, obj):
        return bool(obj.error)

    def get_urls(self):
        return [
            path(
                "sweep/",
                self.admin_site.admin_view(self.sweep_view),
                name="retention_sweeprun_sweep",
            ),
            path(
                "storage/",
                self.admin_site.admin_view(self.storage_view),
                name="retention_sweeprun_storage",
            ),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        extra = {"can_sweep": permissions.staff_may(request.user, "sweep"), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        run = self.get_object(request, object_id)
        if run is not None:
            extra["deleted"] = self._deleted_page(request, run)
        return super().change_view(request, object_id, form_url, extra)

    @staticmethod
    def _deleted_page(request, run) -> dict:
        """One page of the ids the run deleted, in deletion order, by keyset on the row id
        (``?deleted_after=<id>``): a deep page of a million-thread run is an index range."""
        raw = request.GET.get("deleted_after", "")
        after = int(raw) if raw.isdigit() else 0
        rows = list(
            DeletedThread.objects.filter(sweep_run=run, id__gt=after)
            .order_by("id")
            .values_list("id", "thread_id", "horizon")[: DELETED_PAGE + 1]
        )
        more = len(rows) > DELETED_PAGE
        rows = rows[:DELETED_PAGE]
        pks = selectors.thread_pks(alias=store_alias(), thread_ids=[t for _, t, _ in rows])
        counts = dict(
            DeletedThread.objects.filter(sweep_run=run)
            .order_by()
            .values_list("horizon")
            .annotate(n=Count("id"))
        )
        return {
            "rows": [
                {"id": pk, "link": thread_link(t, pks.get(t)), "thread_id": t, "horizon": h}
                for pk, t, h in rows
            ],
            "total": sum(counts.values()),
            "by_horizon": counts,
            "after": after,
            "next_after": rows[-1][0] if more else None,
            "page_size": DELETED_PAGE,
        }

    def storage_view(self, request):
        """GET: what compaction does on this store, behind a confirmation. POST post=yes:
        compact under the sweep's lease (`retention.sweep.compact_store`, as the command
        does) and show its report."""
        if not permissions.staff_may(request.user, "sweep"):
            return refused(request, "sweep", provider=get_saver().provider)
        saver = get_saver()
        report = error = None
        if request.method == "POST" and request.POST.get("post") == "yes":
            try:
                report = compact_store(saver)
            except (SweepAlreadyRunning, CheckpointStoreError) as exc:
                error = f"Not compacted: {exc}"
                messages.error(request, error)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Checkpoint storage",
            "provider": saver.provider,
            "report": report,
            "summary": compaction_summary(report) if report else "",
            "error": error,
        }
        return TemplateResponse(request, "admin/retention/sweeprun/storage.html", context)

    def sweep_view(self, request):
        """GET: a dry run of what would go and what is spared. POST post=yes: the sweep."""
        if not permissions.staff_may(request.user, "sweep"):
            return refused(request, "sweep", provider=get_saver().provider)
        run = request.method == "POST" and request.POST.get("post") == "yes"
        saver = get_saver()
        result = error = None
        try:
            with audit.from_request(request, "admin"):
                result = run_sweep(
                    dry_run=not run, saver=saver, triggered_by=request.user.get_username()
                )
        except CheckpointStoreError as exc:
            error = f"The sweep on the {saver.provider} store did not run: {exc}"
            messages.error(request, error)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Checkpoint sweep: result" if run else "Run checkpoint sweep",
            "ran": run and result is not None,
            "result": result,
            "error": error,
            "spared": _with_links(result.spared if result else []),
        }
        if result is not None and not run:
            context["doomed"] = self._would_delete(request, saver, result)
        if result is not None:
            context["waiting_words"] = duration_words(result.waiting_minutes)
            context["finished_words"] = duration_words(result.finished_minutes)
        if result is not None and run:
            if result.sweep_run_id:
                context["run_url"] = reverse(
                    "admin:retention_sweeprun_change", args=[result.sweep_run_id]
                )
            messages.success(
                request,
                ngettext(
                    "The sweep deleted %(n)d thread",
                    "The sweep deleted %(n)d threads",
                    result.swept_count,
                )
                % {"n": result.swept_count}
                + f" and spared {len(result.spared)}.",
            )
        return TemplateResponse(request, "admin/retention/sweeprun/sweep.html", context)

    def _would_delete(self, request, saver, result) -> dict:
        """The threads the dry run counted, as a table to decide from: one page of rows
        (``?sort=``, ``?page=``) with owner, last write, markers, why it is due and a Hold
        button; and how many of all of them failed. The very ids the dry run counted (so
        the table is as long as the count), not a second listing at a later time."""
        horizon_of = {t: h for h, listed in result.deleted_ids.items() for t in listed}
        alias = store_alias()
        among = AmongValues("thread_id", horizon_of)
        facts = queries.sweep_preview_facts(alias=alias, among=among)
        failed = queries.thread_ids_matching(
            alias=alias,
            among=among,
            condition=status.marker_condition("failed", utcnow(), saver=saver),
        )
        sort = request.GET.get("sort", "order")
        key = sort.lstrip("-")
        if key not in SORTS:
            key, sort = "order", "order"
        place = {t: n for n, t in enumerate(horizon_of)}
        by = {
            "order": lambda t: place[t],
            "thread": lambda t: t,
            "owner": lambda t: facts.get(t, (None, "", None))[1],
            "last_write": lambda t: facts.get(t, (None, "", None))[2] or utcnow(),
            "status": lambda t: t not in failed,
            "why": lambda t: horizon_of[t],
        }[key]
        ordered = sorted(horizon_of, key=lambda t: (by(t), t), reverse=sort.startswith("-"))
        raw = request.GET.get("page", "1")
        pages = max(1, -(-len(ordered) // PREVIEW_PAGE))
        number = min(int(raw), pages) if raw.isascii() and raw.isdigit() and raw != "0" else 1
        shown = ordered[(number - 1) * PREVIEW_PAGE : number * PREVIEW_PAGE]
        markers = _markers(saver, alias, [facts[t][0] for t in shown if t in facts])
        may_hold = permissions.staff_may(request.user, "hold")
        rows = []
        for thread_id in shown:
            pk, owner, last = facts.get(thread_id, (None, "", None))
            found = markers.get(thread_id, [])
            why = next((m.detail for m in found if m.kind == "past_horizon"), "")
            rows.append(
                {
                    "link": thread_link(thread_id, pk),
                    "thread_id": thread_id,
                    "place": place[thread_id] + 1,
                    "owner": owner or "—",
                    "last_write": when(last) if last else "—",
                    "markers": [m for m in found if m.kind not in ("due", "past_horizon")],
                    "failed": thread_id in failed,
                    "horizon": horizon_of[thread_id],
                    "why": why,
                    "hold_url": (
                        keep_store(reverse("admin:checkpoints_thread_hold", args=[pk]))
                        if pk is not None and may_hold
                        else ""
                    ),
                }
            )
        base = reverse("admin:retention_sweeprun_sweep")
        return {
            "rows": rows,
            "total": len(ordered),
            "failed": len(failed),
            "sort": sort,
            "sorts": {
                k: f"{base}?{urlencode({'sort': k if sort != k else '-' + k})}" for k in SORTS
            },
            "page": number,
            "pages": pages,
            "previous": f"{base}?{urlencode({'sort': sort, 'page': number - 1})}"
            if number > 1
            else "",
            "next": f"{base}?{urlencode({'sort': sort, 'page': number + 1})}"
            if number < pages
            else "",
            "back": f"{base}?{urlencode({'sort': sort, 'page': number})}",
        }


def _markers(saver, alias: str, pks: list[int]) -> dict[str, list[status.Marker]]:
    """thread id -> its markers, for one page of the preview's rows."""
    rows = queries.threads_with_status_facts(alias=alias, pks=pks)
    now = utcnow()
    claims = status.claims_of(
        provider=saver.provider, thread_ids=[r.thread_id for r in rows], now=now
    )
    return {
        r.thread_id: status.row_markers(r, now=now, claims=claims.get(r.thread_id)) for r in rows
    }


def duration_words(minutes: int | None) -> str:
    """A retention in days and hours, as an operator reads it: 10080 -> "7 days"."""
    if minutes is None:
        return "—"
    days, rest = divmod(int(minutes), 1440)
    hours, mins = divmod(rest, 60)
    parts = [
        f"{n} {unit}{'' if n == 1 else 's'}"
        for n, unit in ((days, "day"), (hours, "hour"), (mins, "minute"))
        if n
    ]
    return " ".join(parts) or "0 minutes"


def _with_links(entries: list[dict]) -> list[dict]:
    """Spared entries with their thread's link, the threads read in one query."""
    pks = selectors.thread_pks(alias=store_alias(), thread_ids=[e["thread_id"] for e in entries])
    return [{**e, "link": thread_link(e["thread_id"], pks.get(e["thread_id"]))} for e in entries]
