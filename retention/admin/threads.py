"""What retention adds to the thread admin, through its hook (`ThreadAdmin.extend`): the
horizons in force, the live-filter verdict, the park filter, mark and unmark, hold and release."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, Q
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext

from checkpoints import audit, permissions
from checkpoints.admin import ThreadAdmin
from checkpoints.admin.refusals import refused
from checkpoints.admin.store_choice import keep_store, store_saver
from checkpoints.admin.threads import ThreadAdminExtension
from checkpoints.errors import CheckpointStoreError
from checkpoints.status import AmongValues
from checkpoints.store.planning import utcnow
from retention.errors import HoldRefused
from retention.holds import describe, hold_thread, holds_on, release_hold
from retention.live_filters import claims_with_reasons, live_thread_filters
from retention.models import Park
from retention.policy import effective_retention
from retention.runs import mark_finished_by, unmark_finished


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

    def _refusal(self, thread_admin, request, object_id, action: str, allowed):
        """None when the user may press the button; else the 403 in the admin's chrome,
        naming the permission, the attempt audited."""
        if allowed(request):
            return None
        thread = thread_admin.get_object(request, object_id)
        return refused(
            request,
            action,
            thread_id=thread.thread_id if thread is not None else "",
            provider=store_saver().provider,
        )

    def hold_view(self, thread_admin, request, object_id):
        """POST: hold the thread (reason, optional end time), or (release=1) release it."""
        no = self._refusal(thread_admin, request, object_id, "hold", self.has_hold_permission)
        if no is not None:
            return no
        thread, back = self._button_target(
            thread_admin, request, object_id, self.has_hold_permission
        )
        # The sweep preview's Hold leads back to the preview; only a page of this site.
        asked = request.POST.get("next", "")
        if asked and url_has_allowed_host_and_scheme(
            asked, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            back = asked
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
        """The thread a button of its page acts on and that page's URL; an unknown thread
        is a 404. ``allowed`` is asked first by the view (`_refusal`)."""
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
        action = "unfinish" if unmark else "finish"
        no = self._refusal(thread_admin, request, object_id, action, allowed)
        if no is not None:
            return no
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


ThreadAdmin.extend(RetentionThreadExtension())
