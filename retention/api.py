"""Retention API views: finish marks, declared retention, holds, the sweep and its history.

Thin shells over ``retention.runs``, ``retention.policy`` and ``retention.sweep``, on the
thread API's base view, so auth, ownership and errors work the same as for threads.
"""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.response import Response

from checkpoints import permissions
from checkpoints.api.base import StoreAPIView
from checkpoints.api.openapi import extend_schema
from checkpoints.api.serializers import (
    READ_ERRORS,
    WRITE_ERRORS,
    StrictBoolean,
    StrictInteger,
    error_responses,
)
from checkpoints.api.views import THREAD_ID
from retention.holds import describe, hold_thread, holds_on, release_hold
from retention.models import DeletedThread, SweepRun
from retention.policy import declare_retention, effective_retention
from retention.runs import mark_finished_by, unmark_finished
from retention.sweep import sweep_checkpoints

# --- shapes ---------------------------------------------------------------------------


class FinishedSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    finished = serializers.BooleanField()
    marked_at = serializers.DateTimeField(allow_null=True)
    due_at = serializers.DateTimeField(allow_null=True)


class RetentionRequestSerializer(serializers.Serializer):
    waiting_minutes = StrictInteger(required=False, allow_null=True, min_value=1)
    finished_minutes = StrictInteger(required=False, allow_null=True, min_value=1)


class RetentionSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    declared_waiting_minutes = serializers.IntegerField(allow_null=True)
    declared_finished_minutes = serializers.IntegerField(allow_null=True)
    waiting_minutes = serializers.IntegerField(help_text="In force: declared, else platform.")
    finished_minutes = serializers.IntegerField(help_text="In force: declared, else platform.")


class SweepRequestSerializer(serializers.Serializer):
    dry_run = StrictBoolean(required=False, default=False)


class SparedSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    # Plain text: the same two words as a thread's state, which would clash as an enum name.
    horizon = serializers.CharField(help_text='"finished" or "waiting": the horizon passed.')
    owner = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(
        allow_blank=True,
        help_text="Why, in words: who holds it and why, the question it waits on and since "
        "when, its park's deadline.",
    )


class DeletedSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    horizon = serializers.CharField(help_text='"finished" or "waiting": the horizon passed.')


class HoldRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Why the thread is kept.")
    until = serializers.DateTimeField(
        required=False, allow_null=True, help_text="When the hold ends; none: until released."
    )


class HoldSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    held = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)
    until = serializers.DateTimeField(allow_null=True)
    held_by = serializers.CharField(allow_null=True)
    held_at = serializers.DateTimeField(allow_null=True)
    words = serializers.CharField(allow_null=True, help_text='"held by <user>: <reason> until …"')


class SweepResultSerializer(serializers.Serializer):
    provider = serializers.CharField()
    waiting_minutes = serializers.IntegerField()
    finished_minutes = serializers.IntegerField()
    swept_count = serializers.IntegerField()
    finished_swept = serializers.IntegerField()
    waiting_swept = serializers.IntegerField()
    spared = SparedSerializer(many=True)
    written_during = serializers.IntegerField(
        help_text="Threads kept because they were written after the sweep judged them."
    )
    written_during_ids = serializers.ListField(child=serializers.CharField())
    deleted_ids = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Per horizon (finished, waiting), the ids deleted (a dry run: that would be).",
    )
    skipped = serializers.CharField(allow_null=True)
    dry_run = serializers.BooleanField()
    sweep_run_id = serializers.IntegerField(allow_null=True)


class SweepRunSerializer(serializers.ModelSerializer):
    spared = SparedSerializer(many=True, read_only=True)

    class Meta:
        model = SweepRun
        fields = ["id", *SweepRun.RESULT_FIELDS, "spared"]


class SweepRunDetailSerializer(SweepRunSerializer):
    """One run; the ids it deleted are paged at ``deleted_url``."""

    deleted_count = serializers.SerializerMethodField()
    deleted_url = serializers.SerializerMethodField()

    class Meta(SweepRunSerializer.Meta):
        fields = [*SweepRunSerializer.Meta.fields, "deleted_count", "deleted_url"]

    def get_deleted_count(self, run) -> int:
        return DeletedThread.objects.filter(sweep_run=run).count()

    def get_deleted_url(self, run) -> str:
        url = reverse("checkpoints:checkpoint-sweep-deleted", args=[run.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


# --- views ----------------------------------------------------------------------------


def _hold_body(thread_id: str, hold) -> dict:
    return {
        "thread_id": thread_id,
        "held": hold is not None,
        "reason": hold.reason if hold else None,
        "until": hold.until if hold else None,
        "held_by": hold.created_by if hold else None,
        "held_at": hold.created_at if hold else None,
        "words": describe(hold) if hold else None,
    }


class HoldView(StoreAPIView):
    """An operator's hold on a thread: kept for investigation, spared by every sweep."""

    pagination_class = None

    @extend_schema(
        operation_id="threads_hold_read",
        summary="Whether the thread is held, by whom, why and until when.",
        parameters=[THREAD_ID],
        responses={200: HoldSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, thread_id):
        info = self.thread(thread_id)
        found = holds_on(provider=self.saver.provider, thread_ids=[info.thread_id])
        return Response(HoldSerializer(_hold_body(info.thread_id, found.get(info.thread_id))).data)

    @extend_schema(
        operation_id="threads_hold",
        summary="Hold the thread (staff with retention.add_hold): the sweep spares it.",
        description=(
            "A reason is required; `until` is optional (none: until released) and must be "
            "ahead. A thread already held gets this hold instead. Audited."
        ),
        parameters=[THREAD_ID],
        request=HoldRequestSerializer,
        responses={200: HoldSerializer, **error_responses(*WRITE_ERRORS)},
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id)
        permissions.require(request.user, "hold")
        body = HoldRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        hold = hold_thread(
            self.saver,
            info.thread_id,
            reason=body.validated_data["reason"],
            until=body.validated_data.get("until"),
            by=request.user.get_username(),
        )
        return Response(HoldSerializer(_hold_body(info.thread_id, hold)).data)

    @extend_schema(
        operation_id="threads_release_hold",
        summary="Release the thread's hold: the sweep judges it again. Audited.",
        parameters=[THREAD_ID],
        responses={200: HoldSerializer, **error_responses(*READ_ERRORS)},
    )
    def delete(self, request, thread_id):
        info = self.thread(thread_id)
        permissions.require(request.user, "hold")
        release_hold(self.saver, info.thread_id, by=request.user.get_username())
        return Response(HoldSerializer(_hold_body(info.thread_id, None)).data)


def _finished_body(thread_id: str, entry) -> dict:
    return {
        "thread_id": thread_id,
        "finished": entry is not None,
        "marked_at": entry.marked_at if entry else None,
        "due_at": entry.due_at if entry else None,
    }


class FinishView(StoreAPIView):
    pagination_class = None

    @extend_schema(
        operation_id="threads_finish",
        summary="Mark the thread finished: it is due its finished retention from now.",
        parameters=[THREAD_ID],
        request=None,
        responses={200: FinishedSerializer, **error_responses(*WRITE_ERRORS)},
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id, "finish")
        entry = mark_finished_by(self.saver, info.thread_id, request.user)
        return Response(FinishedSerializer(_finished_body(info.thread_id, entry)).data)

    @extend_schema(
        operation_id="threads_unfinish",
        summary="Take the thread out of the finished set (it waits again).",
        parameters=[THREAD_ID],
        responses={200: FinishedSerializer, **error_responses(*READ_ERRORS)},
    )
    def delete(self, request, thread_id):
        info = self.thread(thread_id, "unfinish")
        unmark_finished(self.saver, info.thread_id)
        return Response(FinishedSerializer(_finished_body(info.thread_id, None)).data)


class RetentionView(StoreAPIView):
    pagination_class = None

    @extend_schema(
        operation_id="threads_retention",
        summary="Declare a shorter retention for the thread (never a longer one).",
        description=(
            "Either value may be left out or null (the platform's value applies). A value "
            "longer than the platform's, or finished longer than waiting, is refused (400)."
        ),
        parameters=[THREAD_ID],
        request=RetentionRequestSerializer,
        responses={200: RetentionSerializer, **error_responses(*WRITE_ERRORS)},
    )
    def post(self, request, thread_id):
        info = self.thread(thread_id, "retention")
        body = RetentionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        declared = declare_retention(
            self.saver,
            info.thread_id,
            waiting_minutes=body.validated_data.get("waiting_minutes"),
            finished_minutes=body.validated_data.get("finished_minutes"),
        )
        waiting, finished = effective_retention(self.saver, info.thread_id)
        data = {
            "thread_id": info.thread_id,
            "declared_waiting_minutes": declared.waiting_minutes,
            "declared_finished_minutes": declared.finished_minutes,
            "waiting_minutes": waiting,
            "finished_minutes": finished,
        }
        return Response(RetentionSerializer(data).data)


class SweepView(StoreAPIView):
    pagination_class = None
    throttle_scope = "checkpoints.sweep"

    @extend_schema(
        operation_id="checkpoints_sweep",
        summary="Run the sweep now (staff with retention.run_sweep).",
        description=(
            "Deletes finished threads past due and idle threads past the waiting horizon, "
            "sparing threads a live-thread filter claims. `dry_run` reports without deleting. "
            "409 when another sweep holds the store's lock."
        ),
        request=SweepRequestSerializer,
        responses={200: SweepResultSerializer, **error_responses(*WRITE_ERRORS, 409)},
    )
    def post(self, request):
        permissions.require(request.user, "sweep")
        body = SweepRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = sweep_checkpoints(
            dry_run=body.validated_data["dry_run"],
            saver=self.saver,
            triggered_by=f"api:{request.user.get_username()}",
        )
        return Response(SweepResultSerializer(result.as_dict()).data, status=status.HTTP_200_OK)


class SweepHistoryView(StoreAPIView):
    serializer_class = SweepRunSerializer

    @extend_schema(
        operation_id="checkpoints_sweeps",
        summary="Past sweeps, newest first, each with the threads it spared.",
        responses={200: SweepRunSerializer(many=True), **error_responses(*READ_ERRORS)},
    )
    def get(self, request):
        permissions.require(request.user, "sweep")
        runs = SweepRun.objects.prefetch_related("spared").order_by("-started_at", "-pk")
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(SweepRunSerializer(page, many=True).data)


def _run_or_404(pk: int) -> SweepRun:
    run = SweepRun.objects.filter(pk=pk).first()
    if run is None:
        raise Http404(f"no sweep run {pk}")
    return run


class SweepRunView(StoreAPIView):
    serializer_class = SweepRunDetailSerializer
    pagination_class = None

    @extend_schema(
        operation_id="checkpoints_sweep_run",
        summary="One sweep run: its counts, the threads it spared and why, how many it deleted.",
        responses={200: SweepRunDetailSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, pk: int):
        permissions.require(request.user, "sweep")
        run = _run_or_404(pk)
        return Response(SweepRunDetailSerializer(run, context={"request": request}).data)


class SweepRunDeletedView(StoreAPIView):
    serializer_class = DeletedSerializer

    @extend_schema(
        operation_id="checkpoints_sweep_run_deleted",
        summary="The ids one sweep run deleted, in the order it deleted them, a page at a time.",
        responses={200: DeletedSerializer(many=True), **error_responses(*READ_ERRORS)},
    )
    def get(self, request, pk: int):
        permissions.require(request.user, "sweep")
        run = _run_or_404(pk)
        rows = DeletedThread.objects.filter(sweep_run=run).order_by("id")
        page = self.paginate_queryset(rows.values("thread_id", "horizon"))
        return self.get_paginated_response(DeletedSerializer(page, many=True).data)
