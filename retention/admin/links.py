"""Rows naming threads, linked to the thread's page (the page's threads read in one query)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.urls import reverse
from django.utils.html import format_html

from checkpoints import selectors
from checkpoints.admin.store_choice import keep_store, store_alias

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


class ReadMostly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
