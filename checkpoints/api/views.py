"""Thread API views: thin shells over the saver, TimeTravel and the access rules."""

from __future__ import annotations

import re
from contextlib import nullcontext

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from checkpoints.api import serializers as s
from checkpoints.api.base import StoreAPIView, check_thread_id
from checkpoints.api.limits import load_json_or_text
from checkpoints.api.openapi import extend_schema
from checkpoints.api.queries import history, read_head_words, thread_list
from checkpoints.errors import InvalidCheckpointInput
from checkpoints.graphs import thread_graph, time_travel_for
from checkpoints.store.planning import MAX_THREAD_ID_BYTES
from checkpoints.store.projection import values_unread
from checkpoints.threads import delete_thread
from checkpoints.timetravel.updates import from_writes, update_state

THREAD_ID = OpenApiParameter(
    "thread_id",
    {"type": "string", "minLength": 1, "maxLength": MAX_THREAD_ID_BYTES, "pattern": s.NO_NUL},
    OpenApiParameter.PATH,
    description=(
        "The thread id; any characters but NUL, slashes included (send them as-is or "
        f"percent-encoded), at most {MAX_THREAD_ID_BYTES} bytes of UTF-8."
    ),
)
ETAG = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description='The thread\'s version, quoted ("3"); send it back in If-Match.',
    response=[200],
)
IF_MATCH = re.compile(r'^(\*|(W/)?"[0-9]{1,9}"|[0-9]{1,9})$')
METADATA_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
HISTORY_MAX = 100


def etag(version: int) -> dict[str, str]:
    return {"ETag": f'"{version}"'}


# --- list, detail, delete -------------------------------------------------------------


class ThreadQuerySerializer(serializers.Serializer):
    owner = s.text(150, required=False, help_text="User id or username (staff only).")
    state = s.OneOf(["waiting", "finished"], required=False)
    status = s.OneOf(
        s.status_kinds(),
        required=False,
        help_text="A kind of the status rule, one of: " + ", ".join(s.status_kinds()) + ".",
    )


class ThreadListView(StoreAPIView):
    serializer_class = s.ThreadSerializer

    @extend_schema(
        operation_id="threads_list",
        summary="List the threads you may see, newest write first.",
        description=(
            "Non-staff users see their own threads. Staff see every thread and may filter "
            "by `owner` (user id or username). On the redis and memory providers the store "
            "records no owner, so only staff see threads."
        ),
        parameters=[ThreadQuerySerializer],
        responses={200: s.ThreadSerializer(many=True), **s.error_responses(*s.READ_ERRORS)},
    )
    def get(self, request):
        wanted = s.read_query(ThreadQuerySerializer, request.query_params)
        threads = thread_list(
            saver=self.saver,
            user=request.user,
            owner=wanted.get("owner"),
            state=wanted.get("state"),
            status=wanted.get("status"),
        )
        infos = self.paginate_queryset(threads)
        return self.get_paginated_response(s.ThreadSerializer(infos, many=True).data)


class ThreadDetailView(StoreAPIView):
    serializer_class = s.ThreadDetailSerializer
    pagination_class = None
    throttle_scope = "checkpoints.delete"

    @extend_schema(
        operation_id="threads_retrieve",
        summary="Read one thread and its checkpoint namespaces; its version comes back in ETag.",
        parameters=[THREAD_ID, ETAG],
        responses={200: s.ThreadDetailSerializer, **s.error_responses(*s.READ_ERRORS)},
    )
    def get(self, request, thread_id):
        info = read_head_words(saver=self.saver, info=self.thread(thread_id))
        info.namespaces = time_travel_for(self.saver).namespaces(info.thread_id)
        return Response(s.ThreadDetailSerializer(info).data, headers=etag(info.version))

    @extend_schema(
        operation_id="threads_destroy",
        summary="Delete the thread and everything it holds.",
        parameters=[THREAD_ID],
        responses={204: None, **s.error_responses(*s.READ_ERRORS)},
    )
    def delete(self, request, thread_id):
        info = self.thread(thread_id, "delete")
        delete_thread(saver=self.saver, thread_id=info.thread_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- history and state ----------------------------------------------------------------


class HistoryQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=HISTORY_MAX, default=20)
    before = s.text(required=False, help_text="A checkpoint id: start after it.")
    source = s.text(64, required=False, help_text="Keep checkpoints with this source.")
    checkpoint_ns = s.namespace_field()
    select = s.SelectField(required=False)


def metadata_filter(query) -> dict:
    """``metadata.<key>=<value>`` parameters as a plain dict; keys are checked, never parsed."""
    wanted = {}
    for name, value in query.items():
        if not name.startswith("metadata."):
            continue
        key = name[len("metadata.") :]
        if not METADATA_KEY.fullmatch(key):
            raise InvalidCheckpointInput(
                f"metadata filter key {key!r} is not allowed: use 1-128 letters, digits, "
                "'_' or '-'",
                field=name,
            )
        wanted[key] = load_json_or_text(value, field=name)
    return wanted


class ThreadHistoryView(StoreAPIView):
    pagination_class = None

    @extend_schema(
        operation_id="threads_history",
        summary="Walk the thread's checkpoints newest first, one page at a time.",
        description=(
            "`before` is a checkpoint id (pass the previous page's `next_before`); "
            "`source` keeps checkpoints written by that source. Any number of "
            "`metadata.<key>=<value>` parameters keep checkpoints whose metadata holds that "
            "key with that value: keys are letters, digits, `_` and `-`; a value is read as "
            "JSON when it parses (`metadata.step=3` is the number 3), else as a string. "
            "Items carry channel values only when asked: `select=values,metadata,config` "
            "names the fields each item has (default: all but `values`); a message list in "
            "`values` holds its last MESSAGES_PAGE_SIZE messages (the state endpoint's "
            "`messages_before` reads the rest)."
        ),
        parameters=[
            THREAD_ID,
            HistoryQuerySerializer,
            OpenApiParameter(
                "metadata.<key>",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                description="Metadata filter; one parameter per key (documentation only).",
                exclude=True,
            ),
        ],
        responses={200: s.HistoryPageSerializer, **s.error_responses(*s.READ_ERRORS)},
    )
    def get(self, request, thread_id):
        info = self.thread(thread_id)
        params = s.read_query(HistoryQuerySerializer, request.query_params)
        limit = params["limit"]
        select = params.get("select") or s.HISTORY_DEFAULT
        # Values not asked for are not decoded either (a long message list per row).
        with nullcontext() if "values" in select else values_unread():
            snapshots = list(
                history(
                    saver=self.saver,
                    thread_id=info.thread_id,
                    limit=limit + 1,
                    before=params.get("before"),
                    source=params.get("source"),
                    metadata=metadata_filter(request.query_params),
                    checkpoint_ns=params.get("checkpoint_ns") or "",
                )
            )
        next_before = None
        if len(snapshots) > limit:
            snapshots = snapshots[:limit]
            next_before = snapshots[-1].config["configurable"]["checkpoint_id"]
        return Response(
            {
                "results": s.HistoryItemSerializer(
                    snapshots, many=True, context={"select": select}
                ).data,
                "next_before": next_before,
                # The URL of the next page, as the list endpoints' `next` (DRF's style).
                "next": (
                    None
                    if next_before is None
                    else replace_query_param(request.build_absolute_uri(), "before", next_before)
                ),
            }
        )


class StateQuerySerializer(serializers.Serializer):
    checkpoint_id = s.text(required=False)
    checkpoint_ns = s.namespace_field()
    messages_before = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**53,
        help_text="Each message list shows the messages before this position (from 0; "
        "default: its end), at most MESSAGES_PAGE_SIZE of them: pass `message_pages`' "
        "`next_before` to read the older ones.",
    )


class ThreadStateView(StoreAPIView):
    pagination_class = None

    @extend_schema(
        operation_id="threads_state",
        summary="The thread's state at its newest checkpoint, or at `checkpoint_id`.",
        parameters=[THREAD_ID, StateQuerySerializer, ETAG],
        responses={200: s.StateSnapshotSerializer, **s.error_responses(*s.READ_ERRORS)},
    )
    def get(self, request, thread_id):
        info = self.thread(thread_id)
        query = s.read_query(StateQuerySerializer, request.query_params)
        travel = time_travel_for(self.saver, info.thread_id)
        snapshot = travel.get_state(
            info.thread_id,
            query.get("checkpoint_id"),
            checkpoint_ns=query.get("checkpoint_ns") or "",
        )
        page = {"messages_before": query.get("messages_before")}
        body = s.StateSnapshotSerializer(snapshot, context=page).data
        return Response(body, headers=etag(info.version))


# --- time travel ----------------------------------------------------------------------


def if_match_version(request) -> int | None:
    """The version an ``If-Match`` header names (``"3"``, ``W/"3"`` or ``3``); None for ``*``."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    raw = raw.strip()
    if not IF_MATCH.fullmatch(raw):
        raise InvalidCheckpointInput(
            f'If-Match must be the thread\'s version as an ETag ("3"), got {raw!r}',
            field="If-Match",
        )
    if raw == "*":
        return None
    return int(raw.removeprefix("W/").strip('"'))


class RollbackView(StoreAPIView):
    pagination_class = None
    throttle_scope = "checkpoints.rollback"
    serializer_class = s.RollbackRequestSerializer

    @extend_schema(
        operation_id="threads_rollback",
        summary="Roll the thread back to a checkpoint (a new head equal to it).",
        description=(
            "Send `If-Match` with the version from the thread's ETag to refuse the rollback "
            "(409) when another rollback happened since you read it, and `expected_head` "
            "(the head checkpoint id you read) to refuse it when anything, a graph's turn "
            "included, wrote a new head. The new version comes back in ETag. Side effects "
            "between the target and now are not undone."
        ),
        parameters=[
            THREAD_ID,
            OpenApiParameter(
                "If-Match",
                {"type": "string", "pattern": IF_MATCH.pattern},
                OpenApiParameter.HEADER,
                required=False,
                description='The thread version you read, as its ETag ("3"), or *.',
            ),
            ETAG,
        ],
        request=s.RollbackRequestSerializer,
        responses={
            200: s.StateSnapshotSerializer,
            **s.error_responses(*s.WRITE_ERRORS, 409),
        },
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id, "rollback")
        body = s.RollbackRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        expected = if_match_version(request)
        snapshot = time_travel_for(self.saver, info.thread_id).rollback(
            info.thread_id,
            body.validated_data["checkpoint_id"],
            expected_version=expected,
            checkpoint_ns=body.validated_data.get("checkpoint_ns") or "",
            expected_head=body.validated_data.get("expected_head"),
        )
        version = self.saver.thread_version(info.thread_id)
        return Response(s.StateSnapshotSerializer(snapshot).data, headers=etag(version))


class ForkView(StoreAPIView):
    pagination_class = None
    throttle_scope = "checkpoints.fork"
    serializer_class = s.ForkRequestSerializer

    @extend_schema(
        operation_id="threads_fork",
        summary="Fork a checkpoint into a new thread owned by you.",
        description="Without `new_thread_id` the server picks one. 409 when it exists.",
        parameters=[THREAD_ID],
        request=s.ForkRequestSerializer,
        responses={201: s.StateSnapshotSerializer, **s.error_responses(*s.WRITE_ERRORS, 409)},
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id, "fork")
        body = s.ForkRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        new_id = body.validated_data.get("new_thread_id") or None
        if new_id is not None:
            check_thread_id(new_id, "new_thread_id")
        snapshot = time_travel_for(self.saver, info.thread_id).fork(
            info.thread_id,
            body.validated_data["checkpoint_id"],
            new_id,
            checkpoint_ns=body.validated_data.get("checkpoint_ns") or "",
            owner=request.user,
            expected_head=body.validated_data.get("expected_head"),
        )
        return Response(s.StateSnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class BulkUpdateView(StoreAPIView):
    pagination_class = None
    throttle_scope = "checkpoints.bulk_update"
    serializer_class = s.BulkUpdateRequestSerializer

    @extend_schema(
        operation_id="threads_bulk_update",
        summary="Apply synthetic supersteps and persist one `bulk_update` checkpoint.",
        description=(
            'When the graph that wrote the thread is registered in `CHECKPOINTS["GRAPHS"]` '
            "(named by `graph`, or by the thread's `graph_id` metadata), the writes run as "
            "LangGraph's `update_state`: a superstep's writes are one update as `as_node` "
            "(the node that last wrote, when absent), through its reducers, one checkpoint "
            "per superstep. Without one, writes are last-value updates: each replaces the "
            "channel's value (within "
            "one superstep the later write to a channel wins), and a write to a channel the "
            "stored history shows to have a reducer is refused with 400 naming the channel. "
            "The thread must already have a checkpoint. A value the store's serializer "
            "cannot hold (such as an integer beyond 64 bits) is refused with 400 codec_error."
        ),
        parameters=[THREAD_ID],
        request=s.BulkUpdateRequestSerializer,
        responses={200: s.StateSnapshotSerializer, **s.error_responses(*s.WRITE_ERRORS, 409)},
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id, "bulk_update")
        body = s.BulkUpdateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        graph = body.validated_data.get("graph") or thread_graph(self.saver, info.thread_id)
        supersteps = from_writes(
            body.validated_data["supersteps"], body.validated_data.get("as_node")
        )
        updated = update_state(self.saver, info.thread_id, supersteps, graph=graph)
        return Response(s.StateSnapshotSerializer(updated.snapshot).data)
