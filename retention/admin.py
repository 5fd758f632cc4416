"""Retention in the admin: marks, parks, holds, the sweep page and its history.

Extends the thread admin of `checkpoints.admin` through its hook (`ThreadAdmin.extend`:
live-filter verdict, park filter, mark and unmark actions, hold and release), so the
dependency keeps pointing from retention to checkpoints.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import ngettext

from checkpoints import audit, permissions, selectors
from checkpoints.admin import ThreadAdmin
from checkpoints.admin.base import RefuseBadInputMixin
from checkpoints.admin.filters import ProviderNameFilter
from checkpoints.admin.store_choice import keep_store, store_alias, store_saver
from checkpoints.admin.threads import ThreadAdminExtension
from checkpoints.errors import CheckpointStoreError
from checkpoints.models import FinishedMark
from checkpoints.status import AmongValues
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.errors import HoldRefused
from retention.holds import describe, hold_thread, holds_on, release_hold
from retention.live_filters import claims_with_reasons, live_thread_filters
from retention.models import DeletedThread, Hold, Park, SparedThread, SweepBatch, SweepRun
from retention.policy import effective_retention
from retention.runs import mark_finished_by, unmark_finished
from retention.sweep import sweep_checkpoints as run_sweep

# Deleted ids shown per page of a sweep run's page.
DELETED_PAGE = 100


_ASK = object()


def thread_link(thread_id: str, pk=_ASK):
    """The thread's admin page link, or the bare id when the store no longer holds it.

    ``pk``: the thread's row id when the caller already read it (None: not stored).
    """
    if pk is _ASK:
        pk = selectors.thread_pks(alias=store_alias(), thread_ids=[thread_id]).get(thread_id)
    if pk is None:
        return thread_id
    return format_html(
        '<a href="{}">{}</a>',
        keep_store(reverse("admin:checkpoints_thread_change", args=[pk])),
        thread_id,
    )


class ThreadLinksChangeList(ChangeList):
    """A list of rows naming threads: the page's thread rows are read in one query."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        wanted = {row.thread_id for row in self.result_list}
        found = selectors.thread_pks(alias=store_alias(), thread_ids=wanted)
        for row in self.result_list:
            row.thread_pk = found.get(row.thread_id)


class ThreadLinksMixin:
    def get_changelist(self, request, **kwargs):
        return ThreadLinksChangeList

    @admin.display(description="thread")
    def thread(self, obj):
        return thread_link(obj.thread_id, getattr(obj, "thread_pk", _ASK))


class HasParkFilter(admin.SimpleListFilter):
    title = "park"
    parameter_name = "park"

    def lookups(self, request, model_admin):
        return [("yes", "Has an unexpired park"), ("no", "No unexpired park")]

    def queryset(self, request, queryset):
        if self.value() not in ("yes", "no"):
            return queryset
        live = Park.objects.filter(deadline__gt=utcnow())
        if queryset.db == live.db:
            parked = Q(Exists(live.filter(thread_id=OuterRef("thread_id"))))
        else:
            # Parks live in the default database and the threads in another store's: the
            # live parks' thread ids are read here (one row per parked run) and passed in.
            parked = Q(AmongValues("thread_id", set(live.values_list("thread_id", flat=True))))
        return queryset.filter(parked if self.value() == "yes" else ~parked)


class RetentionThreadExtension(ThreadAdminExtension):
    """What retention adds to the thread admin: verdict, horizons, mark and hold buttons."""

    after = "declared_retention"
    fields = ("retention_in_force", "live_verdict")
    list_filter = (HasParkFilter,)
    actions = ("mark_finished_selected", "unmark_finished_selected")

    def get_urls(self, thread_admin):
        site = thread_admin.admin_site
        mark = site.admin_view(partial(self.mark_view, thread_admin))
        hold = site.admin_view(partial(self.hold_view, thread_admin))
        return [
            path("<path:object_id>/mark/", mark, name="checkpoints_thread_mark"),
            path("<path:object_id>/hold/", hold, name="checkpoints_thread_hold"),
        ]

    def change_context(self, thread_admin, request, object_id):
        extra = {}
        if self.has_mark_permission(request):
            extra["mark_url"] = keep_store(
                reverse("admin:checkpoints_thread_mark", args=[object_id])
            )
        thread = thread_admin.get_object(request, object_id)
        if thread is not None:
            found = holds_on(provider=store_saver().provider, thread_ids=[thread.thread_id])
            hold = found.get(thread.thread_id)
            extra["hold"] = {"words": describe(hold), "row": hold} if hold else None
            extra["hold_zone"] = timezone.get_current_timezone_name()
            if self.has_hold_permission(request):
                extra["hold_url"] = keep_store(
                    reverse("admin:checkpoints_thread_hold", args=[object_id])
                )
        return extra

    def hold_view(self, thread_admin, request, object_id):
        """POST: hold the thread (reason, optional end time), or (release=1) release it."""
        thread, back = self._button_target(
            thread_admin, request, object_id, self.has_hold_permission
        )
        if request.method != "POST":
            return HttpResponseRedirect(back)
        saver = store_saver()
        by = request.user.get_username()
        try:
            with audit.from_request(request, "admin"):
                if request.POST.get("release"):
                    released = release_hold(saver, thread.thread_id, by=by)
                    text = (
                        f"Thread {thread.thread_id} is no longer held: the sweep judges it again."
                        if released
                        else f"Thread {thread.thread_id} was not held."
                    )
                else:
                    hold = hold_thread(
                        saver,
                        thread.thread_id,
                        reason=request.POST.get("reason", ""),
                        until=_local_time(request.POST.get("until", ""), field="until"),
                        by=by,
                    )
                    text = f"Thread {thread.thread_id} {describe(hold)}; the sweep spares it."
        except HoldRefused as exc:
            thread_admin.message_user(request, f"Not held: {exc.message}", messages.ERROR)
            return HttpResponseRedirect(back)
        thread_admin.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(back)

    def _button_target(self, thread_admin, request, object_id, allowed):
        """The thread a button of its page acts on and that page's URL, once ``allowed``
        says the user may press it (else 403; an unknown thread is a 404)."""
        if not allowed(request):
            raise PermissionDenied
        thread = thread_admin.get_object(request, object_id)
        if thread is None:
            raise Http404(f"no thread with pk {object_id!r} in this store")
        return thread, keep_store(reverse("admin:checkpoints_thread_change", args=[thread.pk]))

    def has_hold_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "hold")

    def mark_view(self, thread_admin, request, object_id):
        """POST: mark the thread finished, or (unmark=1) take it out of the finished set."""
        unmark = bool(request.POST.get("unmark"))
        allowed = self.has_unmark_permission if unmark else self.has_mark_permission
        thread, back = self._button_target(thread_admin, request, object_id, allowed)
        if request.method != "POST":
            # A GET never changes anything: it leads back to the page with the button.
            return HttpResponseRedirect(back)
        saver = store_saver()
        with audit.from_request(request, "admin"):
            if unmark:
                unmark_finished(saver, thread.thread_id)
                text = (
                    f"Thread {thread.thread_id} waits again: it was taken out of the finished set."
                )
            else:
                entry = mark_finished_by(saver, thread.thread_id, request.user)
                due = f"{entry.due_at:%Y-%m-%d %H:%M:%S %Z}"
                text = f"Thread {thread.thread_id} marked finished; due at {due}."
        thread_admin.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(back)

    def has_mark_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "finish")

    def has_unmark_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "unfinish")

    @admin.display(description="retention in force")
    def retention_in_force(self, obj):
        waiting, finished = effective_retention(store_saver(), obj.thread_id)
        return f"waiting {waiting} min after the last write, finished {finished} min after the mark"

    @admin.display(description="live-thread filters")
    def live_verdict(self, obj):
        try:
            claims = claims_with_reasons(
                [obj.thread_id], filters=live_thread_filters(), saver=store_saver(), now=utcnow()
            )
        except CheckpointStoreError as exc:
            return format_html('<span class="cs-del">a filter failed: {}</span>', exc)
        claim = claims.get(obj.thread_id)
        if claim:
            return format_html(
                "<strong>live</strong>: claimed by the <code>{}</code> filter ({}), "
                "so the sweep spares it even past its horizon",
                *claim,
            )
        return "not live: no filter claims it; the sweep deletes it once past its horizon"

    @admin.action(description="Mark selected threads finished", permissions=["mark"])
    def mark_finished_selected(self, thread_admin, request, queryset):
        saver = store_saver()
        ids = list(queryset.values_list("thread_id", flat=True))
        for thread_id in ids:
            mark_finished_by(saver, thread_id, request.user)
        thread_admin.message_user(
            request,
            ngettext(
                "Marked %(n)d thread finished; it is due after its finished retention.",
                "Marked %(n)d threads finished; each is due after its finished retention.",
                len(ids),
            )
            % {"n": len(ids)},
            messages.SUCCESS,
        )

    @admin.action(
        description="Take selected threads out of the finished set", permissions=["unmark"]
    )
    def unmark_finished_selected(self, thread_admin, request, queryset):
        saver = store_saver()
        removed = sum(
            1 for t in queryset.values_list("thread_id", flat=True) if unmark_finished(saver, t)
        )
        thread_admin.message_user(
            request,
            ngettext(
                "Unmarked %(n)d thread; it waits again.",
                "Unmarked %(n)d threads; they wait again.",
                removed,
            )
            % {"n": removed},
            messages.SUCCESS,
        )


ThreadAdmin.extend(RetentionThreadExtension())


class ReadMostly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(FinishedMark)
class FinishedMarkAdmin(
    RefuseBadInputMixin,
    ThreadLinksMixin,
    audit.AuditedActionsMixin,
    ReadMostly,
    admin.ModelAdmin,
):
    list_display = ("thread", "marked_at", "due_at", "owner", "overdue")
    search_fields = ("=thread_id", "owner")
    ordering = ("due_at",)
    show_full_result_count = False
    list_per_page = 50
    actions = ["unmark_selected"]

    def has_delete_permission(self, request, obj=None):
        # Removing a mark is "unmark"; the action below does it through the saver.
        return False

    def has_unmark_permission(self, request, obj=None):
        return permissions.staff_may(request.user, "unfinish")

    def get_queryset(self, request):
        return super().get_queryset(request).using(store_alias())

    @admin.display(description="past due", boolean=True)
    def overdue(self, obj):
        return obj.due_at <= utcnow()

    @admin.action(description="Unmark selected threads (they wait again)", permissions=["unmark"])
    def unmark_selected(self, request, queryset):
        saver = get_saver()
        ids = list(queryset.values_list("thread_id", flat=True))
        removed = sum(1 for t in ids if unmark_finished(saver, t))
        self.message_user(
            request,
            ngettext("Unmarked %(n)d thread.", "Unmarked %(n)d threads.", removed) % {"n": removed},
            messages.SUCCESS,
        )


@admin.register(Park)
class ParkAdmin(RefuseBadInputMixin, ThreadLinksMixin, ReadMostly, admin.ModelAdmin):
    list_display = ("thread", "deadline", "expired", "owner", "provider", "created_at")
    list_filter = (ProviderNameFilter,)
    list_per_page = 50
    search_fields = ("=thread_id", "owner")
    ordering = ("deadline",)

    @admin.display(description="expired", boolean=True)
    def expired(self, obj):
        return obj.deadline <= utcnow()

    def changelist_view(self, request, extra_context=None):
        saver = get_saver()
        if not saver.can_park:
            # An empty page on these stores is by design; say why instead of leaving a puzzle.
            self.message_user(
                request,
                f"This deployment's store is {saver.provider}, which cannot hold a parked "
                "run: a park promises that any worker can resume the thread, and a "
                f"{saver.provider} store lives in one process or one file. Only postgres "
                "and redis stores park; runs here are marked finished when they end, or "
                "wait out their waiting horizon.",
                messages.INFO,
            )
        return super().changelist_view(request, extra_context)


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

    def sweep_view(self, request):
        """GET: a dry run of what would go and what is spared. POST post=yes: the sweep."""
        if not permissions.staff_may(request.user, "sweep"):
            raise PermissionDenied
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
            context["doomed"] = self._would_delete(saver, result)
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

    @staticmethod
    def _would_delete(saver, result) -> dict[str, list]:
        """Every thread id the dry run counted, per horizon: the very ids it counted (so
        the lists are as long as the counts), not a second listing at a later time."""
        ids = [t for listed in result.deleted_ids.values() for t in listed]
        pks = selectors.thread_pks(alias=store_alias(), thread_ids=ids)
        return {
            horizon: [thread_link(t, pks.get(t)) for t in listed]
            for horizon, listed in result.deleted_ids.items()
        }


def _with_links(entries: list[dict]) -> list[dict]:
    """Spared entries with their thread's link, the threads read in one query."""
    pks = selectors.thread_pks(alias=store_alias(), thread_ids=[e["thread_id"] for e in entries])
    return [{**e, "link": thread_link(e["thread_id"], pks.get(e["thread_id"]))} for e in entries]


def _local_time(text: str, *, field: str) -> datetime | None:
    """An end time typed in the admin (``datetime-local``: no zone) in the admin's zone."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise HoldRefused(
            f"the hold end time {text!r} is not a date and time (YYYY-MM-DDTHH:MM)", field=field
        ) from exc
    if moment.tzinfo is None:
        moment = timezone.make_aware(moment, timezone.get_current_timezone())
    return moment


@admin.register(Hold)
class HoldAdmin(RefuseBadInputMixin, ThreadLinksMixin, ReadMostly, admin.ModelAdmin):
    """Every hold placed, live or released; placed and released from the thread's page."""

    list_display = (
        "thread",
        "reason",
        "until",
        "created_by",
        "created_at",
        "live",
        "released_by",
        "released_at",
        "provider",
    )
    list_filter = (ProviderNameFilter,)
    list_per_page = 50
    search_fields = ("=thread_id", "created_by")
    ordering = ("-created_at", "-id")

    def has_delete_permission(self, request, obj=None):
        # A hold is released, never deleted: the record says who kept what, and why.
        return False

    @admin.display(description="live", boolean=True)
    def live(self, obj):
        return obj.released_at is None and (obj.until is None or obj.until > utcnow())
