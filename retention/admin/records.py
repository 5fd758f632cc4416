"""The marks, parks and holds: read here, changed only through the services that own them."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.translation import ngettext

from checkpoints import audit, permissions
from checkpoints.admin.base import RefuseBadInputMixin
from checkpoints.admin.filters import ProviderNameFilter
from checkpoints.admin.store_choice import store_alias
from checkpoints.models import FinishedMark
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.admin.links import ReadMostly, ThreadLinksMixin
from retention.models import Hold, Park
from retention.runs import unmark_finished


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
