"""LangGraph Platform's routes this server does not serve, answered 501 with the reason.

The table is langgraph-api 0.16.7's route tables (``langgraph_api/api/*.py``: runs, crons,
streams, the key-value store, assistant writes, UI, MCP, A2A, the event-streaming
transport) less what this server serves. The SDK turns a 404 into "not found" for the
thread it named; a 501 says the call itself is not part of this server. A path that is
no route of the Platform stays a 404; a Platform path asked with a method it does not
take is a 405, as the Platform answers it.
"""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from checkpoints.errors import NotServed

# (methods, path) as the Platform declares them; {thread_id} may hold slashes here (the
# store's ids may), any other parameter is one path segment.
ROUTES: tuple[tuple[tuple[str, ...], str], ...] = (
    # Runs, stateless and on a thread, and their streams.
    (("POST",), "runs"),
    (("POST",), "runs/stream"),
    (("POST",), "runs/wait"),
    (("POST",), "runs/batch"),
    (("POST",), "runs/cancel"),
    (("GET", "POST"), "threads/{thread_id}/runs"),
    (("POST",), "threads/{thread_id}/runs/stream"),
    (("POST",), "threads/{thread_id}/runs/wait"),
    (("GET", "DELETE"), "threads/{thread_id}/runs/{run_id}"),
    (("GET",), "threads/{thread_id}/runs/{run_id}/join"),
    (("GET",), "threads/{thread_id}/runs/{run_id}/stream"),
    (("POST",), "threads/{thread_id}/runs/{run_id}/cancel"),
    (("GET",), "threads/{thread_id}/stream"),
    (("POST",), "threads/{thread_id}/stream/events"),
    (("POST",), "threads/{thread_id}/commands"),
    # Crons.
    (("POST",), "runs/crons"),
    (("POST",), "runs/crons/search"),
    (("POST",), "runs/crons/count"),
    (("GET", "PATCH", "DELETE"), "runs/crons/{cron_id}"),
    (("POST",), "threads/{thread_id}/runs/crons"),
    # The key-value store (the Platform's; the store's own remote saver is elsewhere).
    (("GET", "PUT", "DELETE"), "store/items"),
    (("POST",), "store/items/search"),
    (("POST",), "store/namespaces"),
    # Assistant writes: the assistants here are the registered graphs, read-only.
    (("POST",), "assistants"),
    (("POST",), "assistants/{assistant_id}/latest"),
    (("PATCH", "DELETE"), "assistants/{assistant_id}"),
    # Generative UI, MCP, A2A, the Platform's own metrics and docs pages.
    (("POST",), "ui/{graph_id}"),
    (("GET", "POST", "DELETE"), "mcp"),
    (("GET", "POST", "DELETE"), "a2a/{assistant_id}"),
    (("GET",), "a2a/{assistant_id}/.well-known/agent-card.json"),
    (("GET",), "a2a/{assistant_id}/.well-known/agent.json"),
    (("GET",), ".well-known/agent-card.json"),
    (("GET",), "metrics"),
    (("GET",), "docs"),
)

WHY = (
    "{method} /{path} is a route of LangGraph Platform's API that is not part of this "
    "server: it stores and serves threads, their state and history, and the registered "
    "graphs as read-only assistants; it runs no graph, so runs, streams, crons, the "
    "key-value store and assistant writes are not served here"
)


def _pattern(path: str) -> re.Pattern:
    out = ""
    for part in re.split(r"(\{[a-z_]+\})", path):
        if part == "{thread_id}":
            out += r"[\s\S]+"
        elif part.startswith("{"):
            out += r"[^/]+"
        else:
            out += re.escape(part)
    # The A2A routes take a trailing slash too.
    return re.compile(out + "/?" if path.startswith("a2a/") else out)


_COMPILED = [(methods, _pattern(path)) for methods, path in ROUTES]
# One expression for the URLconf: any path of the table, whatever the method.
URL_REGEX = "^(?:" + "|".join(p.pattern for _, p in _COMPILED) + ")$"


def methods_of(path: str) -> set[str]:
    """The methods the Platform takes on ``path`` among the routes not served here."""
    return {m for methods, p in _COMPILED if p.fullmatch(path) for m in methods}


def answer(method: str, path: str) -> JsonResponse:
    """501 naming the route, for one the table lists; 405 for its path under another
    method; else 404."""
    methods = methods_of(path)
    if method in methods or (method == "HEAD" and "GET" in methods):
        error = NotServed(WHY.format(method=method, path=path))
        return JsonResponse({"detail": error.message, "code": error.code}, status=error.status)
    if methods:
        response = JsonResponse(
            {
                "detail": f"{method} is not allowed on /{path} (it takes "
                f"{', '.join(sorted(methods))}, not served here)",
                "code": "method_not_allowed",
            },
            status=405,
        )
        response["Allow"] = ", ".join(sorted(methods))
        return response
    return JsonResponse(
        {"detail": f"/{path} is no route of LangGraph Platform's API", "code": "not_found"},
        status=404,
    )


@csrf_exempt
def not_served(request: HttpRequest, path: str = "") -> JsonResponse:
    return answer(request.method or "GET", path)
