"""The OpenAPI document of the LangGraph-compatible routes, written by hand (the routes not
served here, which answer 501, are left out).

The views read the Platform's bodies themselves (the SDK's shapes, not DRF serializers),
so drf-spectacular cannot see them; this document states what they accept, and the
schemathesis test fuzzes the routes against it.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from checkpoints.api.base import STORE_METADATA_KEYS
from checkpoints.langgraph_api.assistants import ASSISTANT_FIELDS
from checkpoints.langgraph_api.assistants import SORT_BY as ASSISTANT_SORT_BY
from checkpoints.langgraph_api.parsing import (
    EXTRACT_MAX,
    IDS_MAX,
    PRUNE_MAX,
    SEARCH_MAX,
    SORT_BY,
    STATUSES,
)
from checkpoints.langgraph_api.shapes import STATE_FIELDS, THREAD_FIELDS

OBJECT = {"type": "object"}
STRING = {"type": "string"}
CHECKPOINT = {
    "type": "object",
    "properties": {
        "thread_id": STRING,
        "checkpoint_ns": STRING,
        "checkpoint_id": STRING,
        "checkpoint_map": {"type": "object", "nullable": True},
    },
}
TTL = {
    "oneOf": [
        {"type": "integer", "minimum": 1},
        {
            "type": "object",
            "properties": {
                "ttl": {"type": "integer", "minimum": 1},
                "strategy": {"type": "string", "enum": ["delete"]},
            },
        },
    ]
}
SUPERSTEPS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["updates"],
        "properties": {
            "updates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "values": {"nullable": True},
                        "as_node": {"type": "string", "nullable": True},
                    },
                },
            }
        },
    },
}
# What a client may write as metadata: any object but the service's own keys.
CLIENT_METADATA = {
    "type": "object",
    "description": "Any JSON object; the service's own keys ("
    + ", ".join(STORE_METADATA_KEYS)
    + ") are refused with 422: a thread's owner is the user who made it.",
}
FILTERS = {
    "metadata": OBJECT,
    "values": OBJECT,
    "ids": {"type": "array", "items": STRING, "maxItems": IDS_MAX},
    "status": {"type": "string", "enum": list(STATUSES)},
}
SELECT_THREAD = {"type": "array", "items": {"type": "string", "enum": list(THREAD_FIELDS)}}
SELECT_STATE = {"type": "array", "items": {"type": "string", "enum": list(STATE_FIELDS)}}
HISTORY = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
        "before": {"oneOf": [STRING, CHECKPOINT]},
        "metadata": OBJECT,
        "checkpoint": CHECKPOINT,
        "select": SELECT_STATE,
    },
}


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


ERRORS = {
    "401": _error("no or a wrong x-api-key / token"),
    "403": _error("the token's user lacks the permission the call needs"),
    "404": _error("no such thread (or another owner's) or assistant, or no such route"),
    "409": _error("the thread exists, or stored bytes cannot be read"),
    "413": _error("the body is too large"),
    "422": _error("the body or a parameter is malformed"),
    "429": _error(
        "too many deletes, prunes (one per thread), copies or state updates this minute: "
        "the REST API's rates, shared with it; Retry-After says when to try again"
    ),
}


def _answer(schema: dict | None, status: str = "200") -> dict:
    ok = {"description": "done"}
    if schema is not None:
        ok["content"] = {"application/json": {"schema": schema}}
    return {status: ok, **ERRORS}


def _op(operation_id: str, schema: dict | None, body: dict | None = None, **extra) -> dict:
    status = extra.pop("status", "200")
    op = {"operationId": operation_id, "responses": _answer(schema, status)}
    if "headers" in extra:
        op["responses"][status]["headers"] = extra.pop("headers")
    if body is not None:
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object", "properties": body}}},
        }
    op.update(extra)
    return op


THREAD = {"$ref": "#/components/schemas/Thread"}
ASSISTANT = {"$ref": "#/components/schemas/Assistant"}
ASSISTANT_ID = {
    "name": "assistant_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "format": "uuid"},
    "description": "uuid5(6ba7b821-9dad-11d1-80b4-00c04fd430c8, graph_id); /graph takes the "
    "graph id too",
}
ASSISTANT_FILTERS = {"graph_id": STRING, "name": STRING, "metadata": OBJECT}
PAGING = {
    "X-Pagination-Total": {"schema": {"type": "integer"}},
    "X-Pagination-Next": {"schema": {"type": "integer"}, "description": "absent on the last page"},
}
SCHEMAS = {
    "type": "object",
    "properties": {
        name: {"type": "object", "nullable": True}
        for name in (
            "input_schema",
            "output_schema",
            "state_schema",
            "config_schema",
            "context_schema",
        )
    },
}
STATE = {"$ref": "#/components/schemas/ThreadState"}
THREAD_ID = {
    "name": "thread_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1},
    "example": "seed-1",
}


def document() -> dict:
    thread_ops = {"parameters": [THREAD_ID]}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Checkpoint Store: LangGraph-compatible threads API", "version": "1"},
        "security": [{"ApiKey": []}, {"Token": []}],
        "paths": {
            "/ok": {"get": {**_op("ok", OBJECT), "security": []}},
            "/info": {"get": {**_op("info", OBJECT), "security": []}},
            "/assistants/search": {
                "post": _op(
                    "assistants_search",
                    {"type": "array", "items": ASSISTANT},
                    {
                        **ASSISTANT_FILTERS,
                        "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
                        "offset": {"type": "integer", "minimum": 0},
                        "sort_by": {"type": "string", "enum": list(ASSISTANT_SORT_BY)},
                        "sort_order": {"type": "string", "enum": ["asc", "desc"]},
                        "select": {
                            "type": "array",
                            "items": {"type": "string", "enum": list(ASSISTANT_FIELDS)},
                        },
                    },
                    headers=PAGING,
                )
            },
            "/assistants/count": {
                "post": _op("assistants_count", {"type": "integer"}, ASSISTANT_FILTERS)
            },
            "/assistants/{assistant_id}": {
                "parameters": [ASSISTANT_ID],
                "get": _op("assistant_get", ASSISTANT),
            },
            "/assistants/{assistant_id}/graph": {
                "parameters": [ASSISTANT_ID],
                "get": _op(
                    "assistant_graph",
                    {
                        "type": "object",
                        "properties": {
                            "nodes": {"type": "array", "items": OBJECT},
                            "edges": {"type": "array", "items": OBJECT},
                        },
                    },
                    parameters=[
                        {
                            "name": "xray",
                            "in": "query",
                            "schema": STRING,
                            "description": "true, false or a depth of 1 or more",
                        }
                    ],
                ),
            },
            "/assistants/{assistant_id}/schemas": {
                "parameters": [ASSISTANT_ID],
                "get": _op(
                    "assistant_schemas",
                    {
                        **SCHEMAS,
                        "properties": {"graph_id": STRING, **SCHEMAS["properties"]},
                    },
                ),
            },
            "/assistants/{assistant_id}/subgraphs": {
                "parameters": [ASSISTANT_ID],
                "get": _op(
                    "assistant_subgraphs",
                    {"type": "object", "additionalProperties": SCHEMAS},
                    parameters=[{"name": "recurse", "in": "query", "schema": STRING}],
                ),
            },
            "/assistants/{assistant_id}/subgraphs/{namespace}": {
                "parameters": [
                    ASSISTANT_ID,
                    {"name": "namespace", "in": "path", "required": True, "schema": STRING},
                ],
                "get": _op(
                    "assistant_subgraphs_in",
                    {"type": "object", "additionalProperties": SCHEMAS},
                    parameters=[{"name": "recurse", "in": "query", "schema": STRING}],
                ),
            },
            "/assistants/{assistant_id}/versions": {
                "parameters": [ASSISTANT_ID],
                "post": _op(
                    "assistant_versions",
                    {"type": "array", "items": OBJECT},
                    {
                        "metadata": OBJECT,
                        "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
                        "offset": {"type": "integer", "minimum": 0},
                    },
                ),
            },
            "/threads": {
                "post": _op(
                    "threads_create",
                    THREAD,
                    {
                        "thread_id": STRING,
                        "metadata": CLIENT_METADATA,
                        "if_exists": {"type": "string", "enum": ["raise", "do_nothing"]},
                        "ttl": TTL,
                        "supersteps": SUPERSTEPS,
                    },
                )
            },
            "/threads/search": {
                "post": _op(
                    "threads_search",
                    {"type": "array", "items": THREAD},
                    {
                        **FILTERS,
                        "limit": {"type": "integer", "minimum": 0, "maximum": SEARCH_MAX},
                        "offset": {"type": "integer", "minimum": 0},
                        "sort_by": {"type": "string", "enum": list(SORT_BY)},
                        "sort_order": {"type": "string", "enum": ["asc", "desc"]},
                        "select": SELECT_THREAD,
                        "extract": {
                            "type": "object",
                            "maxProperties": EXTRACT_MAX,
                            "additionalProperties": STRING,
                            "description": "alias -> path such as values.messages[-1].content; "
                            "each thread answers them in `extracted`",
                        },
                    },
                    headers=PAGING,
                )
            },
            "/threads/count": {"post": _op("threads_count", {"type": "integer"}, FILTERS)},
            "/threads/prune": {
                "post": _op(
                    "threads_prune",
                    {"type": "object", "properties": {"pruned_count": {"type": "integer"}}},
                    {
                        "thread_ids": {"type": "array", "items": STRING, "maxItems": PRUNE_MAX},
                        "strategy": {"type": "string", "enum": ["delete", "keep_latest"]},
                    },
                )
            },
            "/threads/{thread_id}": {
                **thread_ops,
                "get": _op("thread_get", THREAD),
                "patch": _op("thread_update", THREAD, {"metadata": CLIENT_METADATA, "ttl": TTL}),
                "delete": _op("thread_delete", None, status="204"),
            },
            "/threads/{thread_id}/copy": {**thread_ops, "post": _op("thread_copy", THREAD)},
            "/threads/{thread_id}/state": {
                **thread_ops,
                "get": _op("thread_state", STATE),
                "post": _op(
                    "thread_update_state",
                    {"type": "object", "properties": {"checkpoint": CHECKPOINT}},
                    {
                        "values": {"nullable": True},
                        "as_node": STRING,
                        "checkpoint": CHECKPOINT,
                        "checkpoint_id": STRING,
                    },
                ),
            },
            "/threads/{thread_id}/state/checkpoint": {
                **thread_ops,
                "post": _op(
                    "thread_state_at_checkpoint",
                    STATE,
                    {"checkpoint": CHECKPOINT, "select": SELECT_STATE},
                ),
            },
            "/threads/{thread_id}/state/{checkpoint_id}": {
                "parameters": [
                    THREAD_ID,
                    {"name": "checkpoint_id", "in": "path", "required": True, "schema": STRING},
                ],
                "get": _op("thread_state_at", STATE),
            },
            "/threads/{thread_id}/history": {
                **thread_ops,
                "get": _op(
                    "thread_history_get",
                    {"type": "array", "items": STATE},
                    parameters=[
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
                        },
                        {"name": "before", "in": "query", "schema": STRING},
                    ],
                ),
                "post": _op(
                    "thread_history", {"type": "array", "items": STATE}, HISTORY["properties"]
                ),
            },
            "/threads/{thread_id}/storage": {
                **thread_ops,
                "get": _op(
                    "thread_storage",
                    {
                        "type": "object",
                        "required": ["thread_id", "total_bytes", "tables", "channels"],
                        "properties": {
                            "thread_id": STRING,
                            "total_bytes": {"type": "integer", "minimum": 0},
                            "tables": {
                                "type": "object",
                                "additionalProperties": {"type": "integer"},
                            },
                            "channels": {
                                "type": "object",
                                "additionalProperties": {"type": "integer"},
                            },
                        },
                    },
                ),
            },
        },
        "components": {
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "Token": {"type": "apiKey", "in": "header", "name": "Authorization"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["detail"],
                    "properties": {"detail": STRING, "code": {"type": "string", "nullable": True}},
                },
                "Assistant": {
                    "type": "object",
                    "description": "A registered graph, read-only: creating, changing or "
                    "deleting one answers 501",
                    "properties": {
                        "assistant_id": STRING,
                        "graph_id": STRING,
                        "name": STRING,
                        "metadata": OBJECT,
                        "version": {"type": "integer"},
                    },
                },
                "Thread": {
                    "type": "object",
                    "properties": {
                        "thread_id": STRING,
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "metadata": OBJECT,
                        "error": {
                            "type": "object",
                            "description": "Only in a search's or count's answer, on a thread "
                            "whose stored state cannot be read: its status is error and its "
                            "values null; code and detail say what failed.",
                            "properties": {"code": STRING, "detail": STRING},
                        },
                    },
                },
                "ThreadState": {
                    "type": "object",
                    "properties": {
                        "next": {"type": "array", "items": STRING},
                        "checkpoint": CHECKPOINT,
                    },
                },
            },
        },
    }


@require_GET
def openapi_view(request):
    return JsonResponse(document())
