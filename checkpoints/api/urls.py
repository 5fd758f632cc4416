"""API routes for threads, history, state and time travel.

Thread ids may hold slashes, so they are matched with the ``thread_id`` converter
(``checkpoints.api.converters``). The detail route's converter refuses ids ending in one of
the action suffixes (here and in ``retention.urls``), so ``<id>/finish/`` reaches the
finish view, not the detail of a thread called ``<id>/finish``; such a thread is still
reachable through its actions and the list.
"""

from django.urls import path

from checkpoints.api import converters, views  # noqa: F401 - converters registers thread ids

urlpatterns = [
    path("threads/", views.ThreadListView.as_view(), name="thread-list"),
    path(
        "threads/<thread_id:thread_id>/history/",
        views.ThreadHistoryView.as_view(),
        name="thread-history",
    ),
    path(
        "threads/<thread_id:thread_id>/state/", views.ThreadStateView.as_view(), name="thread-state"
    ),
    path(
        "threads/<thread_id:thread_id>/rollback/",
        views.RollbackView.as_view(),
        name="thread-rollback",
    ),
    path("threads/<thread_id:thread_id>/fork/", views.ForkView.as_view(), name="thread-fork"),
    path(
        "threads/<thread_id:thread_id>/bulk-update/",
        views.BulkUpdateView.as_view(),
        name="thread-bulk-update",
    ),
    path(
        "threads/<thread_detail_id:thread_id>/",
        views.ThreadDetailView.as_view(),
        name="thread-detail",
    ),
]
