"""The audit trail, read-only."""

from __future__ import annotations

from django.contrib import admin

from checkpoints.admin.base import (
    ReadOnlyMixin,
    RefuseBadInputMixin,
)
from checkpoints.models import (
    AuditEvent,
)


@admin.register(AuditEvent)
class AuditEventAdmin(RefuseBadInputMixin, ReadOnlyMixin, admin.ModelAdmin):
    """The audit trail, newest first: every change from admin, API, command or task."""

    list_display = ("at_seconds", "action", "thread_id", "actor", "origin", "remote_addr")
    list_filter = ("action", "origin", "provider")
    search_fields = ("thread_id", "actor")
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
    date_hierarchy = "at"

    @admin.display(description="when", ordering="at")
    def at_seconds(self, obj):
        return obj.at.strftime("%Y-%m-%d %H:%M:%S")
