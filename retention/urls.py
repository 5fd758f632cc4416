"""API routes for finish marks, declared retention and the sweep."""

from django.urls import path

from checkpoints.api import converters  # noqa: F401 - registers the thread_id converter
from retention import api

urlpatterns = [
    path("threads/<thread_id:thread_id>/finish/", api.FinishView.as_view(), name="thread-finish"),
    path(
        "threads/<thread_id:thread_id>/retention/",
        api.RetentionView.as_view(),
        name="thread-retention",
    ),
    path("threads/<thread_id:thread_id>/hold/", api.HoldView.as_view(), name="thread-hold"),
    path("checkpoints/sweep/", api.SweepView.as_view(), name="checkpoint-sweep"),
    path("checkpoints/sweeps/", api.SweepHistoryView.as_view(), name="checkpoint-sweeps"),
    path("checkpoints/sweeps/<int:pk>/", api.SweepRunView.as_view(), name="checkpoint-sweep-run"),
    path(
        "checkpoints/sweeps/<int:pk>/deleted/",
        api.SweepRunDeletedView.as_view(),
        name="checkpoint-sweep-deleted",
    ),
]
