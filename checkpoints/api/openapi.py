"""The API's OpenAPI schema view: our endpoints only, titled without global settings."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema as spectacular_extend_schema
from drf_spectacular.views import SpectacularAPIView

from checkpoints.api.base import StoreAPIView

SCHEMA_SETTINGS = {
    "TITLE": "Checkpoint Store API",
    "DESCRIPTION": "LangGraph checkpoints: threads, history, time travel, retention and the sweep.",
    "VERSION": "0.1.0",
    "PREPROCESSING_HOOKS": ["checkpoints.api.openapi.only_store_endpoints"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "checkpoints.api.openapi.add_links",
    ],
}


def extend_schema(**kwargs):
    """drf-spectacular's ``extend_schema``, built on its AutoSchema in any host project.

    Its decorator bases a view method's schema on DRF's DEFAULT_SCHEMA_CLASS unless the method
    names one; a host that never set that setting would get DRF's own AutoSchema, which
    cannot describe our views. Naming spectacular's here needs no global setting.
    """
    decorate = spectacular_extend_schema(**kwargs)

    def decorator(view_method):
        view_method.schema = AutoSchema
        return decorate(view_method)

    return decorator


def only_store_endpoints(endpoints):
    """Keep the store's views: a host's own DRF views are not part of this API."""
    return [
        endpoint
        for endpoint in endpoints
        if issubclass(getattr(endpoint[3], "cls", object), StoreAPIView)
    ]


class StoreSchemaView(SpectacularAPIView):
    """The whole URL tree is walked, so paths carry the prefix the host mounted us under."""

    custom_settings = SCHEMA_SETTINGS


# --- OpenAPI links: how one answer feeds the next call ----------------------------------
# Clients (and schemathesis's stateful phase) follow these from a thread or checkpoint an
# answer names to the operations that take it.
THREAD_OPERATIONS = (
    "threads_retrieve",
    "threads_history",
    "threads_state",
    "threads_fork",
    "threads_rollback",
    "threads_bulk_update",
    "threads_finish",
    "threads_unfinish",
    "threads_retention",
    "threads_hold_read",
    "threads_hold",
    "threads_release_hold",
    "threads_destroy",
)
LISTED_THREAD = "$response.body#/results/0/thread_id"
SAME_THREAD = "$request.path.thread_id"
SNAPSHOT_THREAD = "$response.body#/config/configurable/thread_id"
SNAPSHOT_CHECKPOINT = "$response.body#/config/configurable/checkpoint_id"


def _to_thread(thread: str, *targets: str) -> dict[str, dict]:
    return {f"{target}": {"parameters": {"path.thread_id": thread}} for target in targets}


def _to_checkpoint(thread: str, checkpoint: str, name: str = "") -> dict[str, dict]:
    """Links from an answer naming a checkpoint to the calls that take one."""
    return {
        f"threads_rollback{name}": {
            "parameters": {"path.thread_id": thread},
            "requestBody": {"checkpoint_id": checkpoint},
        },
        f"threads_fork{name}": {
            "parameters": {"path.thread_id": thread},
            "requestBody": {"checkpoint_id": checkpoint},
        },
        f"threads_state{name}": {
            "parameters": {"path.thread_id": thread, "query.checkpoint_id": checkpoint},
        },
    }


def _history_item(index: int) -> str:
    return f"$response.body#/results/{index}/config/configurable/checkpoint_id"


LINKS: dict[tuple[str, str], dict[str, dict]] = {
    ("threads_list", "200"): _to_thread(LISTED_THREAD, *THREAD_OPERATIONS),
    ("threads_retrieve", "200"): {
        **_to_thread(SAME_THREAD, *THREAD_OPERATIONS[1:]),
        "threads_rollback_if_match": {
            "parameters": {
                "path.thread_id": SAME_THREAD,
                "header.If-Match": "$response.header.ETag",
            },
        },
    },
    ("threads_history", "200"): {
        **_to_checkpoint(SAME_THREAD, _history_item(0), "_newest"),
        **_to_checkpoint(SAME_THREAD, _history_item(1), "_older"),
        "threads_history_next_page": {
            "parameters": {
                "path.thread_id": SAME_THREAD,
                "query.before": "$response.body#/next_before",
            },
        },
    },
    ("threads_state", "200"): {
        **_to_checkpoint(SAME_THREAD, SNAPSHOT_CHECKPOINT),
        **_to_thread(SAME_THREAD, "threads_bulk_update", "threads_history"),
    },
    ("threads_fork", "201"): {
        **_to_thread(SNAPSHOT_THREAD, *THREAD_OPERATIONS),
        **_to_checkpoint(SNAPSHOT_THREAD, SNAPSHOT_CHECKPOINT, "_of_copy"),
    },
    ("threads_rollback", "200"): {
        **_to_thread(SAME_THREAD, "threads_retrieve", "threads_history", "threads_bulk_update"),
        **_to_checkpoint(SAME_THREAD, SNAPSHOT_CHECKPOINT, "_again"),
    },
    ("threads_bulk_update", "200"): {
        **_to_thread(SAME_THREAD, "threads_history", "threads_retrieve", "threads_bulk_update"),
        **_to_checkpoint(SAME_THREAD, SNAPSHOT_CHECKPOINT),
    },
    ("threads_finish", "200"): {
        **_to_thread(SAME_THREAD, "threads_unfinish", "threads_retrieve", "threads_retention"),
        "checkpoints_sweep": {},
    },
    ("threads_unfinish", "200"): _to_thread(SAME_THREAD, "threads_retrieve", "threads_finish"),
    ("threads_retention", "200"): _to_thread(
        SAME_THREAD, "threads_retrieve", "threads_finish", "threads_retention"
    ),
    ("threads_destroy", "204"): {
        **_to_thread(SAME_THREAD, "threads_retrieve", "threads_history"),
        "threads_list": {},
    },
    ("checkpoints_sweep", "200"): {
        "checkpoints_sweeps": {},
        "threads_list": {},
        "checkpoints_sweep_run": {"parameters": {"path.id": "$response.body#/sweep_run_id"}},
    },
    ("checkpoints_sweep_run", "200"): {
        "checkpoints_sweep_run_deleted": {"parameters": {"path.id": "$request.path.id"}},
    },
    ("threads_hold", "200"): _to_thread(
        SAME_THREAD, "threads_release_hold", "threads_hold_read", "threads_retrieve"
    ),
}


def _target(name: str) -> str:
    """The operation a link name points at: the name up to a ``_newest``-style suffix."""
    for suffix in ("_newest", "_older", "_of_copy", "_again", "_if_match", "_next_page"):
        name = name.removesuffix(suffix)
    return name


def add_links(result, generator, request, public):
    """Postprocessing hook: OpenAPI ``links`` between the operations (see ``LINKS``)."""
    operations = {
        operation.get("operationId"): operation
        for item in result.get("paths", {}).values()
        for operation in item.values()
        if isinstance(operation, dict)
    }
    for (source, status), links in LINKS.items():
        response = operations.get(source, {}).get("responses", {}).get(status)
        if response is None:
            continue
        response["links"] = {
            name: {"operationId": _target(name), **link}
            for name, link in links.items()
            if _target(name) in operations
        }
    return result
