"""LangGraph Platform's thread routes: thin shells over the same services as the REST API."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.errors import InvalidUpdateError
from langgraph.types import StateUpdate
from rest_framework import status
from rest_framework.response import Response

from checkpoints import audit
from checkpoints.api.base import check_thread_id, client_metadata
from checkpoints.errors import (
    CheckpointNotFound,
    GraphNotRegistered,
    InvalidCheckpointInput,
    MissingPermission,
    ThreadExists,
    ThreadNotFound,
)
from checkpoints.graphs import graph_name_of, load_graph, registered
from checkpoints.langgraph_api import shapes
from checkpoints.langgraph_api.base import LangGraphView
from checkpoints.langgraph_api.models import ThreadMetadata
from checkpoints.selectors import ThreadInfo, owners_in_tables, thread_list, threads_named
from checkpoints.store.planning import check_key, metadata_matches, validate_filter
from checkpoints.threads import delete_thread, record_owner, thread_presence

STATUSES = ("idle", "busy", "interrupted", "error")
SORT_BY = ("thread_id", "status", "created_at", "updated_at", "state_updated_at")
SEARCH_MAX = 1000
# How many thread ids one search or count may name, and one prune may delete: each is a
# thread read (or deleted) in one request.
IDS_MAX = 1000
PRUNE_MAX = 100
# What a search's ``extract`` may read, and how many paths one search may ask for.
EXTRACT_ROOTS = ("values", "metadata", "config", "interrupts")
EXTRACT_MAX = 10
NOT_SERVED = (
    "this service stores threads and does not run graphs: runs, assistants, crons and "
    "streams are not served here"
)


# --- reading request bodies -------------------------------------------------------------


def body_of(request) -> dict:
    data = request.data
    if data is None or data == {}:
        return {}
    if not isinstance(data, dict):
        raise InvalidCheckpointInput("the request body must be a JSON object", field="body")
    return data


def field(data: dict, name: str, kinds, default=None, choices=None):
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise InvalidCheckpointInput(f"{name} must be {_kind_name(kinds)}", field=name)
    if not isinstance(value, kinds):
        raise InvalidCheckpointInput(f"{name} must be {_kind_name(kinds)}", field=name)
    if choices is not None and value not in choices:
        raise InvalidCheckpointInput(
            f"{name} must be one of {', '.join(choices)}, got {value!r}", field=name
        )
    return value


def _kind_name(kinds) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a bool"}
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def bounded(data: dict, name: str, default: int, low: int, high: int) -> int:
    value = field(data, name, int, default)
    if not low <= value <= high:
        raise InvalidCheckpointInput(f"{name} must be {low} to {high}, got {value}", field=name)
    return value


def ttl_minutes(data: dict) -> int | None:
    """The SDK's ``ttl`` (``{"ttl": minutes, "strategy": "delete"}``) as whole minutes."""
    ttl = data.get("ttl")
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        ttl = {"ttl": ttl}
    strategy = ttl.get("strategy", "delete")
    if strategy != "delete":
        raise InvalidCheckpointInput(
            f"ttl.strategy {strategy!r} is not supported: the retention sweep deletes threads",
            field="ttl.strategy",
        )
    minutes = ttl.get("ttl")
    if isinstance(minutes, float) and minutes.is_integer():
        minutes = int(minutes)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes <= 0:
        raise InvalidCheckpointInput(
            f"ttl.ttl must be a whole number of minutes above zero, got {minutes!r}",
            field="ttl.ttl",
        )
    return minutes


def check_ttl(minutes: int | None) -> None:
    if minutes is not None:
        from retention.policy import validate_retention

        validate_retention(waiting_minutes=minutes)


def declare_ttl(saver, thread_id: str, minutes: int | None) -> None:
    if minutes is not None:
        from retention.policy import declare_retention

        declare_retention(saver, thread_id, waiting_minutes=minutes)


def checkpoint_of(data: dict, name: str = "checkpoint") -> dict:
    value = field(data, name, dict, {})
    for key in ("checkpoint_id", "checkpoint_ns", "thread_id"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise InvalidCheckpointInput(f"{name}.{key} must be a string", field=f"{name}.{key}")
        if value.get(key):
            check_key(value[key], f"{name}.{key}")
    return value


# --- graphs -----------------------------------------------------------------------------


def graph_for(saver, thread_id: str, metadata: dict | None = None):
    """The registered graph that owns the thread: its graph_id, else the only one registered."""
    graphs = registered()
    if not graphs:
        raise GraphNotRegistered(
            'this call runs the thread\'s graph and CHECKPOINTS["GRAPHS"] registers none; '
            'add it as CHECKPOINTS["GRAPHS"] = {"<graph_id>": "pkg.module:graph"}',
            field="graph_id",
        )
    name = graph_name_of(metadata)
    if name is None:
        row = shapes.metadata_row(saver, thread_id)
        name = graph_name_of(row.metadata if row else None)
    if name is None:
        head = saver.get_tuple(shapes.root_config(thread_id))
        name = graph_name_of(head.metadata if head else None)
    if name is None and len(graphs) == 1:
        name = next(iter(graphs))
    if name is None or name not in graphs:
        raise GraphNotRegistered(
            f'graph {name!r} of thread {thread_id!r} is not in CHECKPOINTS["GRAPHS"] '
            f"(registered: {', '.join(sorted(graphs))}); name one with metadata.graph_id",
            field="graph_id",
        )
    return load_graph(name).copy(update={"checkpointer": saver})


def engine_call(call, graph, updates: list):
    """Run a LangGraph update; its refusals (ambiguous or unknown node, no updates, a
    subgraph namespace the graph lacks, a value a channel's reducer cannot take) are the
    caller's input, never a 500. ``updates``: the values the call applies."""
    try:
        return call()
    except InvalidUpdateError as exc:
        raise InvalidCheckpointInput(str(exc), field="as_node") from exc
    except ValueError as exc:
        raise InvalidCheckpointInput(f"LangGraph refused the update: {exc}") from exc
    except (TypeError, KeyError, AttributeError, IndexError) as exc:
        found = refused_channel(graph, updates)
        if found is None:
            raise
        name, why = found
        raise InvalidCheckpointInput(
            f"channel {name!r} cannot take the value sent for it: its reducer failed with "
            f"{type(why).__name__}: {why}",
            field=f"values.{name}",
        ) from exc


def refused_channel(graph, updates: list) -> tuple[str, Exception] | None:
    """The first channel of ``graph`` whose reducer fails on the value ``updates`` send it,
    tried on an empty channel of its kind, and that failure; None when every one takes it."""
    for values in updates:
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            channel = graph.channels.get(name) if isinstance(name, str) else None
            if channel is None:
                continue
            try:
                empty = channel.from_checkpoint(channel.checkpoint())
            except Exception:  # noqa: BLE001 - a channel that cannot start empty says nothing
                continue
            try:
                empty.update([value])
            except Exception as exc:  # noqa: BLE001 - the graph's reducer, whatever it raises
                return name, exc
    return None


def updates_of(supersteps) -> list[list[StateUpdate]]:
    if not isinstance(supersteps, list):
        raise InvalidCheckpointInput("supersteps must be a list", field="supersteps")
    steps = []
    for i, step in enumerate(supersteps):
        updates = step.get("updates") if isinstance(step, dict) else None
        if not isinstance(updates, list):
            raise InvalidCheckpointInput(
                f"supersteps[{i}] must be an object with an updates list", field="supersteps"
            )
        row = []
        for j, update in enumerate(updates):
            where = f"supersteps[{i}].updates[{j}]"
            if not isinstance(update, dict):
                raise InvalidCheckpointInput(f"{where} must be an object", field="supersteps")
            if update.get("command") is not None:
                raise InvalidCheckpointInput(
                    f"{where}.command is not supported: send values", field="supersteps"
                )
            as_node = update.get("as_node")
            if as_node is not None and not isinstance(as_node, str):
                raise InvalidCheckpointInput(f"{where}.as_node must be a string", field=where)
            row.append(StateUpdate(update.get("values"), as_node))
        steps.append(row)
    return steps


# --- threads ----------------------------------------------------------------------------


class ThreadsView(LangGraphView):
    def post(self, request):
        """Create a thread: a first checkpoint (or the supersteps' ones) and its record."""
        data = body_of(request)
        thread_id = field(data, "thread_id", str) or str(uuid.uuid4())
        check_thread_id(thread_id)
        metadata = client_metadata(data.get("metadata"))
        if_exists = field(data, "if_exists", str, "raise", choices=("raise", "do_nothing"))
        minutes = ttl_minutes(data)
        supersteps = data.get("supersteps")
        steps = updates_of(supersteps) if supersteps else None
        check_ttl(minutes)
        saver = self.saver
        if not owners_in_tables(saver) and not request.user.is_staff:
            # A thread made now would have no owner, so its maker could never see it again.
            raise MissingPermission(
                f"the {saver.provider} store records no thread owners: only staff may create "
                "threads through this API",
                field="thread_id",
            )
        if thread_presence(saver=saver, thread_id=thread_id) is not None:
            taken = ThreadExists(f"thread {thread_id!r} already exists", field="thread_id")
            if if_exists == "raise":
                raise taken
            try:
                info = self.thread(thread_id)
            except ThreadNotFound:
                # Another owner's: the id is taken all the same, and its contents stay theirs.
                raise taken from None
            return Response(shapes.thread_body(saver, info))
        graph = graph_for(saver, thread_id, metadata) if steps else None
        config = shapes.root_config(thread_id)
        with transaction.atomic():
            if graph is not None:
                engine_call(
                    lambda: graph.bulk_update_state(config, steps),
                    graph,
                    [update.values for step in steps for update in step],
                )
            else:
                saver.put(
                    config,
                    empty_checkpoint(),
                    {"source": "input", "step": -1, "parents": {}, **metadata},
                    {},
                )
            record_owner(saver=saver, thread_id=thread_id, user=request.user)
            ThreadMetadata.objects.update_or_create(
                provider=saver.provider, thread_id=thread_id, defaults={"metadata": metadata}
            )
        declare_ttl(saver, thread_id, minutes)
        info = self.thread(thread_id)
        return Response(shapes.thread_body(saver, info))


class ThreadView(LangGraphView):
    # The REST API's throttle on deletes: the same scope, so the same count per user.
    throttle_scopes = {"DELETE": "checkpoints.delete"}

    def get(self, request, thread_id):
        return Response(shapes.thread_body(self.saver, self.thread(thread_id)))

    def patch(self, request, thread_id):
        data = body_of(request)
        metadata = client_metadata(data.get("metadata"))
        minutes = ttl_minutes(data)
        # Staff change another user's thread only with the permission (the owner needs none).
        info = self.thread(thread_id, "retention" if minutes is not None else "metadata")
        check_ttl(minutes)
        row, _ = ThreadMetadata.objects.get_or_create(
            provider=self.saver.provider, thread_id=info.thread_id
        )
        row.metadata = {**row.metadata, **metadata}
        row.save()
        declare_ttl(self.saver, info.thread_id, minutes)
        if "return=minimal" in request.headers.get("Prefer", ""):
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(shapes.thread_body(self.saver, self.thread(thread_id)))

    def delete(self, request, thread_id):
        info = self.thread(thread_id, "delete")
        delete_thread(saver=self.saver, thread_id=info.thread_id)
        ThreadMetadata.objects.filter(
            provider=self.saver.provider, thread_id=info.thread_id
        ).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


def thread_ids_of(data: dict, name: str, most: int) -> list[str] | None:
    """The body's list of thread ids, each checked by the store's rule, duplicates dropped;
    at most ``most`` of them."""
    ids = field(data, name, list, None)
    if ids is None:
        return None
    if len(ids) > most:
        raise InvalidCheckpointInput(
            f"{name} names {len(ids)} threads; one request names at most {most}", field=name
        )
    for i, thread_id in enumerate(ids):
        if not isinstance(thread_id, str):
            raise InvalidCheckpointInput(
                f"{name}[{i}] must be a string, got {type(thread_id).__name__}",
                field=f"{name}[{i}]",
            )
        check_thread_id(thread_id, f"{name}[{i}]")
    return list(dict.fromkeys(ids))


class Found:
    """One thread a search considers; its answer (which reads its head) read when needed."""

    def __init__(self, saver, info: ThreadInfo, row: ThreadMetadata | None) -> None:
        self.saver, self.info, self.row = saver, info, row
        self._body: dict | None = None

    @property
    def metadata(self) -> dict:
        return self.row.metadata if self.row else {}

    @property
    def body(self) -> dict:
        if self._body is None:
            self._body = shapes.listed_thread_body(self.saver, self.info, self.row)
        return self._body

    def sort_key(self, name: str):
        # Only the status is read from the head; the times are the record's.
        source = self.body if name == "status" else shapes.thread_record(self.info, self.row)
        return source[name] or ""


def _holds(held: dict | None, wanted: dict) -> bool:
    # A thread no state was written to has values null: it matches no value filter.
    held = held or {}
    return all(held.get(k, object()) == v for k, v in wanted.items())


class SearchView(LangGraphView):
    """Search reads each candidate's head: the filters are on values and status too."""

    def post(self, request):
        data = body_of(request)
        limit = bounded(data, "limit", 10, 0, SEARCH_MAX)
        offset = bounded(data, "offset", 0, 0, 2**31)
        sort_by = field(data, "sort_by", str, None, choices=SORT_BY)
        sort_order = field(data, "sort_order", str, "desc", choices=("asc", "desc"))
        select = field(data, "select", list, None)
        if select is not None and not all(s in shapes.THREAD_FIELDS for s in select):
            raise InvalidCheckpointInput(
                f"select names fields of {', '.join(shapes.THREAD_FIELDS)}", field="select"
            )
        extract = extract_of(data)
        found = matching(self, data)
        if sort_by is not None:
            key = "updated_at" if sort_by == "state_updated_at" else sort_by
            found.sort(key=lambda f: f.sort_key(key), reverse=sort_order == "desc")
        answer = []
        # Only the page's threads are read whole (unless a filter read them already).
        for one in found[offset : offset + limit]:
            body = one.body
            picked = shapes.pick(body, select, shapes.THREAD_FIELDS)
            if extract:
                picked["extracted"] = {
                    alias: extracted(body, path) for alias, path in extract.items()
                }
            answer.append(picked)
        return Response(answer)


def extract_of(data: dict) -> dict[str, list]:
    """The search's ``extract`` ({alias: "values.messages[-1].content"}) as parsed paths."""
    extract = field(data, "extract", dict, {})
    if len(extract) > EXTRACT_MAX:
        raise InvalidCheckpointInput(
            f"extract names at most {EXTRACT_MAX} paths, got {len(extract)}", field="extract"
        )
    paths = {}
    for alias, path in extract.items():
        if not alias.isidentifier() or not alias.isascii():
            raise InvalidCheckpointInput(
                f"extract alias {alias!r} must be letters, digits and _ (not first a digit)",
                field="extract",
            )
        if alias in shapes.THREAD_FIELDS:
            raise InvalidCheckpointInput(
                f"extract alias {alias!r} is a thread field's name; choose another",
                field="extract",
            )
        if not isinstance(path, str) or not path:
            raise InvalidCheckpointInput(
                f"extract path of {alias!r} must be a non-empty string", field="extract"
            )
        steps = path_steps(path)
        if steps is None or steps[0] not in EXTRACT_ROOTS:
            raise InvalidCheckpointInput(
                f"extract path {path!r} must start with one of {', '.join(EXTRACT_ROOTS)} and "
                "go on with .key and [index] steps",
                field="extract",
            )
        paths[alias] = steps
    return paths


_STEP = re.compile(r"\.([^.\[\]]+)|\[(-?\d+)\]")


def path_steps(path: str) -> list | None:
    """``values.messages[-1].content`` -> ["values", "messages", -1, "content"]; None when
    the path is not a key followed by .key and [index] steps."""
    root = re.match(r"[^.\[\]]+", path)
    if root is None:
        return None
    steps: list = [root.group()]
    at = root.end()
    while at < len(path):
        found = _STEP.match(path, at)
        if found is None:
            return None
        key, index = found.groups()
        steps.append(int(index) if index is not None else key)
        at = found.end()
    return steps


def extracted(body: dict, steps: list):
    """The value at ``steps`` in the thread's answer, or None where the path leads nowhere."""
    value = body
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
        elif not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    return value


def matching(view: LangGraphView, data: dict) -> list[Found]:
    """The threads a search or count finds, in the store's order (or the order ``ids``
    names them): filtered on their metadata rows first, their heads read only for a filter
    on values or status."""
    metadata = field(data, "metadata", dict, {})
    values = field(data, "values", dict, {})
    wanted_status = field(data, "status", str, None, choices=STATUSES)
    ids = thread_ids_of(data, "ids", IDS_MAX)
    saver, user = view.saver, view.request.user
    if ids is not None:
        infos = threads_named(saver=saver, user=user, thread_ids=ids)
    else:
        page = thread_list(saver=saver, user=user)
        infos = page[0 : len(page)]
    rows = shapes.metadata_rows(saver, None if ids is None else [i.thread_id for i in infos])
    found = [Found(saver, info, rows.get(info.thread_id)) for info in infos]
    if metadata:
        found = [f for f in found if _holds(f.metadata, metadata)]
    if wanted_status is not None:
        found = [f for f in found if f.body["status"] == wanted_status]
    if values:
        found = [f for f in found if _holds(f.body["values"], values)]
    return found


class CountView(LangGraphView):
    def post(self, request):
        return Response(len(matching(self, body_of(request))))


class CopyView(LangGraphView):
    throttle_scope = "checkpoints.fork"

    def post(self, request, thread_id):
        info = self.thread(thread_id, "fork")
        saver = self.saver
        new_id = str(uuid.uuid4())
        saver.copy_thread(info.thread_id, new_id)
        record_owner(saver=saver, thread_id=new_id, user=request.user)
        row = shapes.metadata_row(saver, info.thread_id)
        ThreadMetadata.objects.create(
            provider=saver.provider, thread_id=new_id, metadata=dict(row.metadata) if row else {}
        )
        audit.record(
            "copy_thread", thread_id=new_id, provider=saver.provider, detail={"source": thread_id}
        )
        return Response(shapes.thread_body(saver, self.thread(new_id)))


class PruneView(LangGraphView):
    # Each thread pruned counts as one of the REST API's deletes (`throttle_cost`).
    throttle_scope = "checkpoints.delete"

    def throttle_cost(self, request) -> int:
        self._check_body_size(request)
        data = request.data
        ids = data.get("thread_ids") if isinstance(data, dict) else None
        if not isinstance(ids, list):
            return 1
        return len({t for t in ids if isinstance(t, str)}) or 1

    def post(self, request):
        data = body_of(request)
        ids = thread_ids_of(data, "thread_ids", PRUNE_MAX)
        if ids is None:
            raise InvalidCheckpointInput("thread_ids is required", field="thread_ids")
        strategy = field(data, "strategy", str, "delete", choices=("delete", "keep_latest"))
        # Every id is checked before anything goes: one unseen thread refuses the whole call.
        infos = [self.thread(t, "delete") for t in ids]
        saver = self.saver
        for info in infos:
            if strategy == "delete":
                delete_thread(saver=saver, thread_id=info.thread_id)
                ThreadMetadata.objects.filter(
                    provider=saver.provider, thread_id=info.thread_id
                ).delete()
            else:
                gone = saver.prune([info.thread_id], strategy="keep_latest")
                audit.record(
                    "prune",
                    thread_id=info.thread_id,
                    provider=saver.provider,
                    detail={"strategy": strategy, "checkpoints_deleted": gone},
                )
        return Response({"pruned_count": len(infos)})


# --- state and history ------------------------------------------------------------------


def flag(value: str | None, name: str) -> bool:
    """A boolean query parameter as the SDK sends it (``true``/``false``)."""
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidCheckpointInput(f"{name} must be true or false, got {value!r}", field=name)


def select_of(value) -> list[str] | None:
    if value is None or value == []:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidCheckpointInput("select must be a list of field names", field="select")
    return value


class StateView(LangGraphView):
    # update_state counts as the REST API's bulk update does.
    throttle_scopes = {"POST": "checkpoints.bulk_update"}

    def get(self, request, thread_id, checkpoint_id=None):
        info = self.thread(thread_id)
        select = select_of(request.query_params.getlist("select") or None)
        subgraphs = flag(request.query_params.get("subgraphs"), "subgraphs")
        return Response(self.state(info.thread_id, checkpoint_id, "", select, subgraphs))

    def state(
        self, thread_id: str, checkpoint_id, checkpoint_ns: str, select, subgraphs=False
    ) -> dict:
        travel = shapes.travel(self.saver, thread_id)
        try:
            snapshot = travel.get_state(thread_id, checkpoint_id, checkpoint_ns=checkpoint_ns)
        except ThreadNotFound:
            if checkpoint_id:
                raise
            return empty_state(thread_id, checkpoint_ns)
        return shapes.state_body(self.saver, snapshot, select, subgraphs=subgraphs)

    def post(self, request, thread_id):
        """update_state: the registered graph applies the values, its reducers and as_node."""
        info = self.thread(thread_id, "bulk_update")
        data = body_of(request)
        values = data.get("values")
        if values is not None and not isinstance(values, (dict, list)):
            raise InvalidCheckpointInput("values must be an object, a list or null", field="values")
        as_node = field(data, "as_node", str, None)
        checkpoint = checkpoint_of(data)
        checkpoint_id = field(data, "checkpoint_id", str, None) or checkpoint.get("checkpoint_id")
        config = shapes.root_config(
            info.thread_id, checkpoint.get("checkpoint_ns") or "", checkpoint_id
        )
        if checkpoint_id and self.saver.get_tuple(config) is None:
            raise CheckpointNotFound(
                f"checkpoint {checkpoint_id!r} of thread {info.thread_id!r} not found",
                field="checkpoint_id",
            )
        graph = graph_for(self.saver, info.thread_id)
        new_config = engine_call(
            lambda: graph.update_state(config, values, as_node=as_node), graph, [values]
        )
        audit.record(
            "bulk_update",
            thread_id=info.thread_id,
            provider=self.saver.provider,
            detail={
                "as_node": as_node,
                "checkpoint_id": new_config["configurable"].get("checkpoint_id"),
            },
        )
        return Response({"checkpoint": shapes.checkpoint_ref(new_config)})


class StateAtView(StateView):
    """A past checkpoint's state: read-only (update_state posts to ``/state``)."""

    http_method_names = ["get", "options"]
    throttle_scopes: dict[str, str] = {}


def empty_state(thread_id: str, checkpoint_ns: str = "") -> dict:
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


class StateCheckpointView(StateView):
    http_method_names = ["post", "options"]
    # A read, posted.
    throttle_scopes: dict[str, str] = {}

    def post(self, request, thread_id):
        info = self.thread(thread_id)
        data = body_of(request)
        checkpoint = checkpoint_of(data)
        select = select_of(data.get("select"))
        subgraphs = field(data, "subgraphs", bool, False)
        return Response(
            self.state(
                info.thread_id,
                checkpoint.get("checkpoint_id"),
                checkpoint.get("checkpoint_ns") or "",
                select,
                subgraphs,
            )
        )


class HistoryView(LangGraphView):
    def get(self, request, thread_id):
        query = request.query_params
        data: dict[str, Any] = {}
        if "limit" in query:
            try:
                data["limit"] = int(query["limit"])
            except ValueError as exc:
                raise InvalidCheckpointInput("limit must be an integer", field="limit") from exc
        if query.get("before"):
            data["before"] = query["before"]
        return self.answer(thread_id, data)

    def post(self, request, thread_id):
        return self.answer(thread_id, body_of(request))

    def answer(self, thread_id: str, data: dict):
        info = self.thread(thread_id)
        limit = bounded(data, "limit", 10, 1, SEARCH_MAX)
        before = data.get("before")
        if isinstance(before, dict):
            before = checkpoint_of(data, "before").get("checkpoint_id")
        elif before is not None and not isinstance(before, str):
            raise InvalidCheckpointInput("before must be a checkpoint or its id", field="before")
        metadata = field(data, "metadata", dict, None)
        checkpoint = checkpoint_of(data)
        select = select_of(data.get("select"))
        wanted = checkpoint.get("checkpoint_id")
        ns = checkpoint.get("checkpoint_ns") or ""
        travel = shapes.travel(self.saver, info.thread_id)
        try:
            if wanted:
                # As LangGraph's server lists with the checkpoint in its config: that one
                # checkpoint, when ``before`` and ``metadata`` keep it.
                snapshot = travel.get_state(info.thread_id, wanted, checkpoint_ns=ns)
                kept = (not before or wanted < before) and metadata_matches(
                    snapshot.metadata or {}, validate_filter(metadata)
                )
                snapshots = [snapshot] if kept else []
            else:
                snapshots = list(
                    travel.get_state_history(
                        info.thread_id,
                        limit=limit,
                        before=before or None,
                        filter=metadata or None,
                        checkpoint_ns=ns,
                    )
                )
        except (ThreadNotFound, CheckpointNotFound):
            if before and not wanted:
                raise
            snapshots = []  # LangGraph's server lists nothing for a checkpoint it lacks
        return Response([shapes.state_body(self.saver, s, select) for s in snapshots])


class StorageView(LangGraphView):
    """Bytes the thread's payloads take, by table and by channel (the Platform answers 501
    for any custom checkpointer; the store knows its rows)."""

    def get(self, request, thread_id):
        info = self.thread(thread_id)
        held = self.saver.thread_storage(info.thread_id)
        return Response(
            {
                "thread_id": info.thread_id,
                "total_bytes": held.total,
                "tables": held.tables,
                "channels": held.channels,
            }
        )


@csrf_exempt
def not_served(request, *args, **kwargs):
    """Runs, assistants, crons and streams: this service has no graph runtime."""
    return JsonResponse({"detail": NOT_SERVED, "code": "not_served"}, status=404)
