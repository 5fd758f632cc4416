"""The Platform's routes served here, without trailing slashes (the SDK does not follow
redirects): meta, read-only assistants and threads.

A host mounts them with ``path("langgraph/", include("checkpoints.langgraph_api.urls"))``.
Ids may hold slashes (the thread_id converter); a detail id never ends in one of the
action suffixes, so ``<id>/state`` reaches the state view. A Platform route not served
here (runs, streams, crons, the key-value store, assistant writes) is a JSON 501 saying
why (:mod:`checkpoints.langgraph_api.unsupported`); any other path a JSON 404.
"""

from django.urls import path, re_path
from django.urls.converters import PathConverter, register_converter

from checkpoints.api import converters  # noqa: F401 - registers thread_id
from checkpoints.langgraph_api import assistants, meta, unsupported, views
from checkpoints.langgraph_api.openapi import openapi_view

SUFFIXES = ("state", "history", "copy", "storage", "runs", "stream", "checkpoint")


class LangGraphThreadId(PathConverter):
    regex = r"(?:[^/]+|[\s\S]+" + "".join(f"(?<!/{s})" for s in SUFFIXES) + ")"


register_converter(LangGraphThreadId, "lg_thread_id")

urlpatterns = [
    path("", meta.OkView.as_view(), name="lg-root"),
    path("ok", meta.OkView.as_view(), name="lg-ok"),
    path("info", meta.InfoView.as_view(), name="lg-info"),
    path("openapi.json", openapi_view, name="lg-openapi"),
    path(
        "assistants/search", assistants.AssistantSearchView.as_view(), name="lg-assistants-search"
    ),
    path("assistants/count", assistants.AssistantCountView.as_view(), name="lg-assistants-count"),
    path(
        "assistants/<str:assistant_id>/graph",
        assistants.AssistantGraphView.as_view(),
        name="lg-assistant-graph",
    ),
    path(
        "assistants/<str:assistant_id>/schemas",
        assistants.AssistantSchemasView.as_view(),
        name="lg-assistant-schemas",
    ),
    path(
        "assistants/<str:assistant_id>/subgraphs",
        assistants.AssistantSubgraphsView.as_view(),
        name="lg-assistant-subgraphs",
    ),
    path(
        "assistants/<str:assistant_id>/subgraphs/<str:namespace>",
        assistants.AssistantSubgraphsView.as_view(),
        name="lg-assistant-subgraphs-in",
    ),
    path(
        "assistants/<str:assistant_id>/versions",
        assistants.AssistantVersionsView.as_view(),
        name="lg-assistant-versions",
    ),
    path("assistants/<str:assistant_id>", assistants.AssistantView.as_view(), name="lg-assistant"),
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
    # Runs, streams and the rest the Platform serves and this server does not: 501, before
    # the detail route could read ``x/runs`` as a thread id (ids may hold slashes, so an id
    # ending in one of these routes is not reachable here).
    re_path(
        rf"^(?P<path>{unsupported.URL_REGEX.removeprefix('^').removesuffix('$')})$",
        unsupported.not_served,
        name="lg-not-served",
    ),
    path("threads/<lg_thread_id:thread_id>", views.ThreadView.as_view(), name="lg-thread"),
    re_path(r"^(?P<path>[\s\S]*)$", unsupported.not_served, name="lg-no-route"),
]
