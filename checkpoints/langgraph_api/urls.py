"""The Platform's thread routes, without trailing slashes (the SDK does not follow redirects).

A host mounts them with ``path("langgraph/", include("checkpoints.langgraph_api.urls"))``.
Ids may hold slashes (the thread_id converter); a detail id never ends in one of the
action suffixes, so ``<id>/state`` reaches the state view. Anything else under the mount
(runs, assistants, crons, streams) is a JSON 404 saying why.
"""

from django.urls import path, re_path
from django.urls.converters import PathConverter, register_converter

from checkpoints.api import converters  # noqa: F401 - registers thread_id
from checkpoints.langgraph_api import views
from checkpoints.langgraph_api.openapi import openapi_view

SUFFIXES = ("state", "history", "copy", "storage", "runs", "stream", "checkpoint")


class LangGraphThreadId(PathConverter):
    regex = r"(?:[^/]+|[\s\S]+" + "".join(f"(?<!/{s})" for s in SUFFIXES) + ")"


register_converter(LangGraphThreadId, "lg_thread_id")

urlpatterns = [
    path("openapi.json", openapi_view, name="lg-openapi"),
    path("threads", views.ThreadsView.as_view(), name="lg-threads"),
    path("threads/search", views.SearchView.as_view(), name="lg-threads-search"),
    path("threads/count", views.CountView.as_view(), name="lg-threads-count"),
    path("threads/prune", views.PruneView.as_view(), name="lg-threads-prune"),
    path(
        "threads/<thread_id:thread_id>/state/checkpoint",
        views.StateCheckpointView.as_view(),
        name="lg-thread-state-checkpoint",
    ),
    path(
        "threads/<thread_id:thread_id>/state/<str:checkpoint_id>",
        views.StateAtView.as_view(),
        name="lg-thread-state-at",
    ),
    path("threads/<thread_id:thread_id>/state", views.StateView.as_view(), name="lg-thread-state"),
    path(
        "threads/<thread_id:thread_id>/history",
        views.HistoryView.as_view(),
        name="lg-thread-history",
    ),
    path("threads/<thread_id:thread_id>/copy", views.CopyView.as_view(), name="lg-thread-copy"),
    path(
        "threads/<thread_id:thread_id>/storage",
        views.StorageView.as_view(),
        name="lg-thread-storage",
    ),
    # A thread's runs and crons, whatever follows (runs.wait, runs.get, .../join, .../cancel,
    # .../stream): not served, rather than read as a thread id holding "/runs/" (the
    # detail route's converter lets ids hold slashes, so such an id is not reachable here).
    re_path(
        r"^threads/[\s\S]+/(?:runs|crons)(?:/[\s\S]*)?$",
        views.not_served,
        name="lg-thread-runs-not-served",
    ),
    path("threads/<lg_thread_id:thread_id>", views.ThreadView.as_view(), name="lg-thread"),
    re_path(r"^[\s\S]*$", views.not_served, name="lg-not-served"),
]
