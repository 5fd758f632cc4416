"""LangGraph Platform's thread routes: thin shells over the same services as the REST API."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import StateUpdate
from rest_framework import status
from rest_framework.response import Response

from checkpoints import audit
from checkpoints.api.base import check_thread_id, client_metadata
from checkpoints.api.queries import thread_list
from checkpoints.errors import (
    CheckpointNotFound,
    InvalidCheckpointInput,
    MissingPermission,
    ThreadExists,
    ThreadNotFound,
)
from checkpoints.langgraph_api import records, shapes
from checkpoints.langgraph_api.base import LangGraphView
from checkpoints.langgraph_api.models import ThreadMetadata
from checkpoints.langgraph_api.pagination import paging_headers
from checkpoints.langgraph_api.parsing import (
    IDS_MAX,
    PRUNE_MAX,
    SEARCH_MAX,
    SORT_BY,
    STATUSES,
    body_of,
    bounded,
    check_metadata_size,
    check_ttl,
    checkpoint_of,
    declare_ttl,
    extract_of,
    extracted,
    field,
    flag,
    select_of,
    thread_ids_of,
    ttl_minutes,
    updates_of,
)
from checkpoints.selectors import ThreadInfo, owners_in_tables, threads_named
from checkpoints.store.planning.metadata import metadata_matches, validate_filter
from checkpoints.threads import delete_thread, record_owner, thread_presence
from checkpoints.timetravel.updates import update_state

# --- threads ----------------------------------------------------------------------------


class ThreadsView(LangGraphView):
    @property
    def throttle_scopes(self) -> dict[str, str]:
        # A thread made with supersteps is the REST API's bulk update: counted as one.
        request = getattr(self, "request", None)
        if request is None or request.method != "POST":
            return {}
        self._check_body_size(request)
        data = request.data
        return (
            {"POST": "checkpoints.bulk_update"}
            if isinstance(data, dict) and data.get("supersteps")
            else {}
        )

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
        graph = records.graph_name(saver, thread_id, metadata) if steps else None
        if steps and graph is None:
            # The graph-less fallback updates only channels a thread has held, and a new
            # thread has held none: refused before anything is written.
            raise InvalidCheckpointInput(
                f"supersteps on new thread {thread_id!r} need its graph: without one an "
                "update writes only channels the thread has held; register the graph in "
                'CHECKPOINTS["GRAPHS"] and name it with metadata.graph_id',
                field="supersteps",
            )
        with transaction.atomic():
            if steps:
                update_state(saver, thread_id, steps, graph=graph)
            else:
                saver.put(
                    shapes.root_config(thread_id),
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
        merged = {**row.metadata, **metadata}
        check_metadata_size(merged)
        row.metadata = merged
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
        return Response(answer, headers=paging_headers(len(answer), offset, limit, len(found)))


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
    rows = records.metadata_rows(saver, None if ids is None else [i.thread_id for i in infos])
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
        row = records.metadata_row(saver, info.thread_id)
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
        travel = records.travel(self.saver, thread_id)
        try:
            snapshot = travel.get_state(thread_id, checkpoint_id, checkpoint_ns=checkpoint_ns)
        except ThreadNotFound:
            if checkpoint_id:
                raise
            return empty_state(thread_id, checkpoint_ns)
        return shapes.state_body(self.saver, snapshot, select, subgraphs=subgraphs)

    def post(self, request, thread_id):
        """update_state: through the thread's registered graph, else the graph-less fallback."""
        info = self.thread(thread_id, "bulk_update")
        data = body_of(request)
        values = data.get("values")
        if values is not None and not isinstance(values, (dict, list)):
            raise InvalidCheckpointInput("values must be an object, a list or null", field="values")
        as_node = field(data, "as_node", str, None)
        checkpoint = checkpoint_of(data)
        checkpoint_id = field(data, "checkpoint_id", str, None) or checkpoint.get("checkpoint_id")
        updated = update_state(
            self.saver,
            info.thread_id,
            [[StateUpdate(values, as_node)]],
            graph=records.graph_name(self.saver, info.thread_id),
            checkpoint_id=checkpoint_id,
            checkpoint_ns=checkpoint.get("checkpoint_ns") or "",
        )
        return Response(shapes.update_body(updated.config))


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
        travel = records.travel(self.saver, info.thread_id)
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
