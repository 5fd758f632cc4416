"""Read-only assistants: one per graph registered in ``CHECKPOINTS["GRAPHS"]``.

LangGraph's server makes a "system" assistant for every graph of its langgraph.json, with
the id ``uuid5(NAMESPACE_GRAPH, graph_id)``; Studio lists them first, then draws the
graph and reads its schemas. Here they are the same records, made from the registry on
each call (nothing is stored): search, count, get, graph, schemas, subgraphs and versions
answer as the Platform's do; creating, changing or deleting one is a 501
(:mod:`checkpoints.langgraph_api.unsupported`).
"""

from __future__ import annotations

import uuid
import warnings
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables.utils import create_model
from pydantic import TypeAdapter
from rest_framework.response import Response

from checkpoints.errors import AssistantNotFound, InvalidCheckpointInput
from checkpoints.graphs import load_graph, registered
from checkpoints.langgraph_api import unsupported
from checkpoints.langgraph_api.base import LangGraphView
from checkpoints.langgraph_api.pagination import paging_headers
from checkpoints.langgraph_api.parsing import SEARCH_MAX, body_of, bounded, field

# LangGraph's namespace for the assistant made from a graph (langgraph_api.graph).
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
ASSISTANT_FIELDS = (
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "name",
    "created_at",
    "updated_at",
    "version",
    "description",
)
SORT_BY = ("assistant_id", "graph_id", "name", "created_at", "updated_at")
# Keys of a graph's configurable the Platform fills itself, left out of config_schema.
SERVER_CONFIGURABLE = (
    "__pregel_checkpointer",
    "__pregel_store",
    "checkpoint_id",
    "checkpoint_ns",
    "thread_id",
)
# LangGraph names a compiled graph "LangGraph" unless told otherwise.
DEFAULT_GRAPH_NAME = "LangGraph"

# (graph id, its spec) -> when this process first made its assistant: the record's
# created_at, as the Platform's is the time the server registered the graph.
_first_seen: dict[tuple[str, str], datetime] = {}


def assistant_id_of(graph_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


def named_graph(graph_id: str):
    """The registered graph, named as the Platform names it (its id, unless it has a
    name of its own): the state schema's title comes from that name."""
    graph = load_graph(graph_id)
    if graph.name == DEFAULT_GRAPH_NAME:
        graph = graph.copy(update={"name": graph_id})
    return graph


def _created(graph_id: str, spec: Any) -> datetime:
    key = (graph_id, repr(spec))
    return _first_seen.setdefault(key, datetime.now(UTC))


def assistant(graph_id: str) -> dict:
    when = _created(graph_id, registered()[graph_id]).isoformat()
    graph = load_graph(graph_id)
    return {
        "assistant_id": assistant_id_of(graph_id),
        "graph_id": graph_id,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": graph.name if graph.name != DEFAULT_GRAPH_NAME else graph_id,
        "created_at": when,
        "updated_at": when,
        "version": 1,
        "description": None,
    }


def all_assistants() -> list[dict]:
    """Every registered graph's assistant, newest first as the Platform lists them (a
    graph registered later is newer; one sighting time for graphs seen together)."""
    names = list(registered())
    for name in names:
        _created(name, registered()[name])
    order = {name: i for i, name in enumerate(names)}
    found = [assistant(name) for name in names]
    found.sort(key=lambda a: (a["created_at"], order[a["graph_id"]]), reverse=True)
    return found


def graph_of(assistant_id: str, *, graph_id_too: bool = False) -> str:
    """The graph id behind ``assistant_id`` (a graph id itself where the Platform takes
    one in its place): a 422 for an id that is no UUID, a 404 for one no graph makes."""
    graphs = registered()
    if graph_id_too and assistant_id in graphs:
        return assistant_id
    try:
        wanted = str(uuid.UUID(assistant_id))
    except ValueError:
        raise InvalidCheckpointInput(
            f"invalid assistant ID {assistant_id!r}: must be a UUID", field="assistant_id"
        ) from None
    for name in graphs:
        if assistant_id_of(name) == wanted:
            return name
    raise AssistantNotFound(
        f"assistant {assistant_id} not found: the assistants here are the registered graphs "
        f"({', '.join(sorted(graphs)) or 'none'})",
        field="assistant_id",
    )


def _contains(held: Any, wanted: Any) -> bool:
    # PostgreSQL's jsonb containment, which the Platform's metadata filters use.
    if isinstance(wanted, dict):
        return isinstance(held, dict) and all(
            k in held and _contains(held[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(held, list) and all(any(_contains(h, w) for h in held) for w in wanted)
    return held == wanted


# --- schemas ------------------------------------------------------------------------------


def _schema(read) -> dict | None:
    # A schema a graph cannot give is null, as the Platform answers it: the graph still
    # draws and its other schemas still answer.
    try:
        return read()
    except Exception:  # noqa: BLE001 - any failure of the graph's own schema code
        return None


def state_schema(graph) -> dict:
    """The state's JSON schema as the Platform writes it: each output channel's update
    type, optional; a channel whose type has no schema is Any."""
    fields: dict[str, tuple] = {}
    for name in graph.stream_channels_list:
        kind = graph.channels[name].UpdateType
        try:
            create_model(name, __root__=(kind, None)).model_json_schema()
            fields[name] = (kind, None)
        except Exception:  # noqa: BLE001 - pydantic refuses many types, each its own way
            fields[name] = (Any, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def config_schema(graph) -> dict:
    """The schema of ``configurable`` alone, without the keys the server fills itself."""
    with warnings.catch_warnings():
        # config_schema() is deprecated for context; the Platform still answers with it.
        warnings.simplefilter("ignore", DeprecationWarning)
        model = graph.config_schema()
    fields = getattr(model, "model_fields", None) or {}
    if "configurable" not in fields:
        return {}
    schema = TypeAdapter(fields["configurable"].annotation).json_schema()
    for key in SERVER_CONFIGURABLE:
        schema.get("properties", {}).pop(key, None)
    config_type = getattr(graph, "config_type", None)
    if config_type is not None and hasattr(config_type, "__name__"):
        schema["title"] = config_type.__name__
    return schema


def schemas(graph) -> dict:
    return {
        "input_schema": _schema(graph.get_input_jsonschema),
        "output_schema": _schema(graph.get_output_jsonschema),
        "state_schema": _schema(lambda: state_schema(graph)),
        "config_schema": _schema(lambda: config_schema(graph)),
        "context_schema": _schema(graph.get_context_jsonschema),
    }


def xray_of(text: str | None) -> bool | int:
    """``?xray=``: true/false, or a depth of 1 or more (the Platform's reading)."""
    if not text or text in ("false", "False"):
        return False
    if text in ("true", "True"):
        return True
    try:
        depth = int(text)
    except ValueError:
        depth = 0
    if depth <= 0:
        raise InvalidCheckpointInput(
            f"invalid xray value {text!r}: true, false or a depth of 1 or more", field="xray"
        )
    return depth


def drawing(graph, xray: bool | int) -> dict:
    try:
        drawn = graph.get_graph(xray=xray).to_json()
    except NotImplementedError:
        raise InvalidCheckpointInput(
            f"graph {graph.name!r} does not support visualization", field="assistant_id"
        ) from None
    for node in drawn.get("nodes", []):
        data = node.get("data")
        if isinstance(data, dict):
            # The Platform drops the runnable's import path from each node.
            data.pop("id", None)
    return drawn


# --- views --------------------------------------------------------------------------------


def _filtered(data: dict) -> list[dict]:
    graph_id = field(data, "graph_id", str, None)
    name = field(data, "name", str, None)
    metadata = field(data, "metadata", dict, {})
    if graph_id is not None and graph_id not in registered():
        raise AssistantNotFound(
            f"graph {graph_id!r} not found: registered are "
            f"{', '.join(sorted(registered())) or 'none'}",
            field="graph_id",
        )
    return [
        a
        for a in all_assistants()
        if (graph_id is None or a["graph_id"] == graph_id)
        and (not name or name.lower() in a["name"].lower())
        and (not metadata or _contains(a["metadata"], metadata))
    ]


class AssistantSearchView(LangGraphView):
    def post(self, request):
        data = body_of(request)
        limit = bounded(data, "limit", 10, 1, SEARCH_MAX)
        offset = bounded(data, "offset", 0, 0, 2**31)
        sort_by = field(data, "sort_by", str, None, choices=SORT_BY)
        sort_order = field(data, "sort_order", str, "desc", choices=("asc", "desc"))
        select = field(data, "select", list, None)
        if select is not None and not all(s in ASSISTANT_FIELDS for s in select):
            raise InvalidCheckpointInput(
                f"select names fields of {', '.join(ASSISTANT_FIELDS)}", field="select"
            )
        found = _filtered(data)
        if sort_by is not None:
            found.sort(key=lambda a: str(a[sort_by]).lower(), reverse=sort_order.lower() == "desc")
        page = found[offset : offset + limit]
        if select:
            page = [{k: v for k, v in a.items() if k in select} for a in page]
        return Response(page, headers=paging_headers(len(page), offset, limit, len(found)))


class AssistantCountView(LangGraphView):
    def post(self, request):
        return Response(len(_filtered(body_of(request))))


class AssistantView(LangGraphView):
    def get(self, request, assistant_id):
        return Response(assistant(graph_of(assistant_id)))

    def patch(self, request, assistant_id):
        return unsupported.answer("PATCH", f"assistants/{assistant_id}")

    def delete(self, request, assistant_id):
        return unsupported.answer("DELETE", f"assistants/{assistant_id}")


class AssistantGraphView(LangGraphView):
    def get(self, request, assistant_id):
        graph_id = graph_of(assistant_id, graph_id_too=True)
        xray = xray_of(request.query_params.get("xray"))
        return Response(drawing(named_graph(graph_id), xray))


class AssistantSchemasView(LangGraphView):
    def get(self, request, assistant_id):
        graph_id = graph_of(assistant_id)
        return Response({"graph_id": graph_id, **schemas(named_graph(graph_id))})


class AssistantSubgraphsView(LangGraphView):
    def get(self, request, assistant_id, namespace=None):
        graph = named_graph(graph_of(assistant_id))
        recurse = request.query_params.get("recurse", "False") in ("true", "True")
        try:
            found = graph.get_subgraphs(namespace=namespace, recurse=recurse)
            return Response({ns: schemas(sub) for ns, sub in found})
        except NotImplementedError:
            raise InvalidCheckpointInput(
                f"graph {graph.name!r} does not support visualization", field="assistant_id"
            ) from None


class AssistantVersionsView(LangGraphView):
    """An assistant's versions: one, the graph as registered."""

    def post(self, request, assistant_id):
        data = body_of(request)
        metadata = field(data, "metadata", dict, {})
        limit = bounded(data, "limit", 10, 1, SEARCH_MAX)
        offset = bounded(data, "offset", 0, 0, 2**31)
        one = assistant(graph_of(assistant_id))
        version = {
            k: one[k]
            for k in (
                "assistant_id",
                "version",
                "graph_id",
                "config",
                "context",
                "metadata",
                "created_at",
                "name",
                "description",
            )
        }
        versions = [version] if _contains(version["metadata"], metadata) else []
        versions = versions[offset : offset + limit]
        if not versions:
            raise AssistantNotFound(
                f"assistant {assistant_id} has no version matching", field="assistant_id"
            )
        return Response(versions)
