"""Per-checkpoint admin pages: what changed, rollback and fork (confirm first, then POST)."""

from __future__ import annotations

import json
import re
import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest, HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import content_disposition_header

from checkpoints import audit
from checkpoints.admin import queries
from checkpoints.admin.discards import SHOWN_HEAD, discards_context, moved_words, shown_head_of
from checkpoints.admin.display import Paging, shown_change, when
from checkpoints.admin.refusals import refused
from checkpoints.admin.store_choice import keep_store, store_alias, store_saver
from checkpoints.codec.render import readable
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput, ThreadVersionConflict
from checkpoints.graphs import time_travel_for
from checkpoints.models import Checkpoint
from checkpoints.timetravel.diff import baseline, channel_changes


def load_tuple(row: Checkpoint):
    """The saver's decoded tuple for an ORM checkpoint row (None when it is gone)."""
    config = {
        "configurable": {
            "thread_id": row.thread.thread_id,
            "checkpoint_ns": row.checkpoint_ns,
            "checkpoint_id": row.checkpoint_id,
        }
    }
    return store_saver().get_tuple(config)


def find_checkpoint(thread_id: str, checkpoint_id: str, ns: str = "") -> Checkpoint | None:
    """The checkpoint row in the store this page reads (see `queries.checkpoint_row`)."""
    return queries.checkpoint_row(
        alias=store_alias(), thread_id=thread_id, checkpoint_id=checkpoint_id, ns=ns
    )


def checkpoint_link(thread_id: str, checkpoint_id: str):
    """A link to the checkpoint's admin page, or plain text when it is not stored."""
    found = find_checkpoint(thread_id, checkpoint_id) if thread_id and checkpoint_id else None
    label = f"{checkpoint_id} (thread {thread_id})"
    if found is None:
        return f"{label}, no longer stored"
    return format_html(
        '<a href="{}">{}</a>',
        keep_store(reverse("admin:checkpoints_checkpoint_change", args=[found.pk])),
        label,
    )


def value_url(checkpoint_pk: int, **which: str | int) -> str:
    """The download of one value of a checkpoint: ``channel=name`` or ``write=position``."""
    url = reverse("admin:checkpoints_checkpoint_value", args=[checkpoint_pk])
    return keep_store(f"{url}?{urlencode(which)}")


def bad_request(exc: CheckpointStoreError) -> HttpResponseBadRequest:
    """A 400 whose text names the parameter at fault."""
    return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")


def _summary(row: Checkpoint | None) -> dict | None:
    if row is None:
        return None
    return {
        "row": row,
        "url": keep_store(reverse("admin:checkpoints_checkpoint_change", args=[row.pk])),
        "written": when(row.created_at),
    }


class _CheckpointPage:
    """Shared plumbing: load the row, check the permission, render with the admin context."""

    template = ""
    permission = ""

    def __init__(self, model_admin) -> None:
        self.model_admin = model_admin

    def row(self, request, object_id) -> Checkpoint:
        obj = self.model_admin.get_object(request, object_id)
        if obj is None:
            raise Http404(f"checkpoint {object_id!r} does not exist")
        return obj

    def check(self, request, object_id):
        """None when the user may; else the 403 in the admin's chrome (the attempt audited)."""
        allowed = getattr(self.model_admin, f"has_{self.permission}_permission")
        if allowed(request):
            return None
        row = self.model_admin.get_object(request, object_id)
        return refused(
            request,
            self.permission,
            thread_id=row.thread.thread_id if row is not None else "",
            provider=store_saver().provider,
        )

    def render(self, request, obj: Checkpoint, **context) -> TemplateResponse:
        opts = self.model_admin.opts
        return TemplateResponse(
            request,
            [
                f"admin/{opts.app_label}/{opts.model_name}/{self.template}",
                f"admin/{opts.app_label}/{self.template}",
                f"admin/{self.template}",
            ],
            {
                **self.model_admin.admin_site.each_context(request),
                "opts": opts,
                "original": obj,
                "object": obj,
                "thread_url": keep_store(
                    reverse("admin:checkpoints_thread_change", args=[obj.thread_id])
                ),
                "checkpoint_url": keep_store(
                    reverse("admin:checkpoints_checkpoint_change", args=[obj.pk])
                ),
                **context,
            },
        )


class ChangesView(_CheckpointPage):
    template = "changes.html"

    def __call__(self, request, object_id):
        try:
            paging = Paging.of(request)
        except InvalidCheckpointInput as exc:
            return bad_request(exc)
        obj = self.row(request, object_id)
        if not self.model_admin.has_view_permission(request, obj):
            raise PermissionDenied
        try:
            saved = load_tuple(obj)
            if saved is None:
                raise Http404(f"the saver holds no checkpoint {obj.checkpoint_id!r}")
            parent_row = None
            parent_values: dict = {}
            against, relation = baseline(saved.metadata, obj.parent_checkpoint_id)
            if against:
                parent_row = find_checkpoint(obj.thread.thread_id, against, obj.checkpoint_ns)
                if parent_row is not None:
                    parent_row.thread = obj.thread
                    parent_saved = load_tuple(parent_row)
                    if parent_saved is not None:
                        parent_values = parent_saved.checkpoint.get("channel_values") or {}
        except CheckpointStoreError as exc:
            messages.error(
                request, f"Cannot show what checkpoint {obj.checkpoint_id} changed: {exc}"
            )
            return HttpResponseRedirect(
                keep_store(reverse("admin:checkpoints_checkpoint_change", args=[obj.pk]))
            )
        values = saved.checkpoint.get("channel_values") or {}
        changes = channel_changes(parent_values, values)
        return self.render(
            request,
            obj,
            title=f"What checkpoint {obj.checkpoint_id} changed",
            parent=_summary(parent_row),
            relation=relation,
            changes=[shown_change(c, paging) for c in changes],
            unchanged=sorted(set(values) - {c.channel for c in changes}),
            nothing_text=f"Nothing changed against the {relation}.",
            compare_url=keep_store(
                reverse("admin:checkpoints_checkpoint_compare") + f"?a={obj.pk}"
            ),
        )


class RollbackView(_CheckpointPage):
    template = "rollback_confirmation.html"
    permission = "rollback"

    def __call__(self, request, object_id, from_action=False):
        if (refusal := self.check(request, object_id)) is not None:
            return refusal
        target = self.row(request, object_id)
        thread_id = target.thread.thread_id
        if request.method == "POST" and request.POST.get("post") == "yes" and not from_action:
            return self.perform(request, target, thread_id)
        return self.confirmation(request, target, thread_id)

    def confirmation(
        self,
        request,
        target: Checkpoint,
        thread_id: str,
        refused: ThreadVersionConflict | None = None,
    ):
        head = queries.head_row(alias=store_alias(), thread_id=thread_id, ns=target.checkpoint_ns)
        return self.render(
            request,
            target,
            title=f"Roll back thread {thread_id}?",
            target=_summary(target),
            head=_summary(head),
            target_is_head=head is not None and head.pk == target.pk,
            version=target.thread.version,
            shown_head=head.checkpoint_id if head is not None else "",
            refusal=_refusal(request, "Rollback", thread_id, target.checkpoint_ns, head, refused),
            head_moved=refused is not None and refused.field == SHOWN_HEAD,
            action_url=keep_store(
                reverse("admin:checkpoints_checkpoint_rollback", args=[target.pk])
            ),
            **discards_context(thread_id, target.checkpoint_ns, head, target),
        )

    def perform(self, request, target: Checkpoint, thread_id: str):
        try:
            shown_head = shown_head_of(request)
            with audit.from_request(request, "admin"):
                # The service checks the posted text: a bad version is refused, not ignored.
                snapshot = time_travel_for(store_saver(), thread_id).rollback(
                    thread_id,
                    target.checkpoint_id,
                    expected_version=request.POST.get("expected_version"),
                    checkpoint_ns=target.checkpoint_ns,
                    expected_head=shown_head,
                )
        except ThreadVersionConflict as exc:
            # The operator confirmed a head that is no longer the head: show the one there
            # is now, and what rolling it back would discard, before anything is done.
            response = self.confirmation(request, target, thread_id, exc)
            response.status_code = exc.status
            return response
        except CheckpointStoreError as exc:
            if exc.field == SHOWN_HEAD:
                return bad_request(exc)
            messages.error(request, f"Rollback of thread {thread_id} failed: {exc}")
            return HttpResponseRedirect(
                keep_store(reverse("admin:checkpoints_checkpoint_change", args=[target.pk]))
            )
        url = _result_url(snapshot)
        messages.success(
            request,
            format_html(
                'Thread {} rolled back to {}: the new head is <a href="{}">{}</a>.',
                thread_id,
                target.checkpoint_id,
                url,
                snapshot.checkpoint_id,
            ),
        )
        return HttpResponseRedirect(url)


def _result_url(snapshot) -> str:
    """The admin page of the checkpoint a time-travel call wrote."""
    ns = snapshot.config["configurable"].get("checkpoint_ns") or ""
    written = find_checkpoint(snapshot.thread_id, snapshot.checkpoint_id, ns)
    if written is None:
        return keep_store(reverse("admin:checkpoints_thread_changelist"), changelist=True)
    return keep_store(reverse("admin:checkpoints_checkpoint_change", args=[written.pk]))


def _refusal(request, verb: str, thread_id: str, ns: str, head, refused) -> str:
    """Why the operation was refused: a moved head in words (times, node, what to do)."""
    if refused is None:
        return ""
    if refused.field == SHOWN_HEAD:
        return moved_words(request, thread_id=thread_id, ns=ns, head=head)
    return f"{verb} of thread {thread_id} failed: {refused.message}."


class ForkView(_CheckpointPage):
    template = "fork_confirmation.html"
    permission = "fork"

    def __call__(self, request, object_id, from_action=False):
        if (refusal := self.check(request, object_id)) is not None:
            return refusal
        source = self.row(request, object_id)
        thread_id = source.thread.thread_id
        new_thread_id = (request.POST.get("new_thread_id") or "").strip()
        refused = None
        if request.method == "POST" and request.POST.get("post") == "yes" and not from_action:
            try:
                return self.perform(request, source, new_thread_id)
            except ThreadVersionConflict as exc:
                # What the page said the fork leaves behind is stale: say so, show it anew.
                refused = exc
            except CheckpointStoreError as exc:
                if exc.field == SHOWN_HEAD:
                    return bad_request(exc)
                messages.error(request, f"Fork of thread {thread_id} failed: {exc}")
        head = queries.head_row(alias=store_alias(), thread_id=thread_id, ns=source.checkpoint_ns)
        response = self.render(
            request,
            source,
            title=f"Fork thread {thread_id}?",
            source=_summary(source),
            head=_summary(head),
            source_is_head=head is not None and head.pk == source.pk,
            shown_head=head.checkpoint_id if head is not None else "",
            refusal=_refusal(request, "Fork", thread_id, source.checkpoint_ns, head, refused),
            head_moved=refused is not None and refused.field == SHOWN_HEAD,
            new_thread_id=new_thread_id or str(uuid.uuid4()),
            action_url=keep_store(reverse("admin:checkpoints_checkpoint_fork", args=[source.pk])),
            **discards_context(thread_id, source.checkpoint_ns, head, source),
        )
        if refused is not None:
            response.status_code = refused.status
        return response

    def perform(self, request, source: Checkpoint, new_thread_id: str):
        thread_id = source.thread.thread_id
        shown_head = shown_head_of(request)
        with audit.from_request(request, "admin"):
            snapshot = time_travel_for(store_saver(), thread_id).fork(
                thread_id,
                source.checkpoint_id,
                new_thread_id=new_thread_id or None,
                checkpoint_ns=source.checkpoint_ns,
                owner=request.user,
                expected_head=shown_head,
            )
        # The fork lands on its new thread's page (its lineage names the source), the
        # message linking back to the checkpoint it was forked from.
        forked = queries.thread_pk_of(alias=store_alias(), thread_id=snapshot.thread_id)
        url = (
            keep_store(reverse("admin:checkpoints_thread_change", args=[forked]))
            if forked is not None
            else _result_url(snapshot)
        )
        messages.success(
            request,
            format_html(
                'Forked into new thread {} from thread {} at <a class="cs-fork-source" '
                'href="{}">checkpoint {}</a>.',
                snapshot.thread_id,
                thread_id,
                keep_store(reverse("admin:checkpoints_checkpoint_change", args=[source.pk])),
                source.checkpoint_id,
            ),
        )
        return HttpResponseRedirect(url)


# Pieces of the rendered JSON sent at once: many small writes cost more than the copy.
DOWNLOAD_CHUNK = 64 * 1024
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class ValueDownloadView(_CheckpointPage):
    """One value of a checkpoint, whole, as a JSON file: what a page's cut preview leaves out.

    ``channel=<name>`` names a channel's value, ``write=<n>`` the checkpoint's n-th pending
    write (from 0, in the order the page lists them). The JSON is the page's rendering (the
    stored form, indented), sent in pieces.
    """

    def __call__(self, request, object_id):
        obj = self.row(request, object_id)
        if not self.model_admin.has_view_permission(request, obj):
            raise PermissionDenied
        try:
            which, label = _which_value(request)
        except InvalidCheckpointInput as exc:
            return bad_request(exc)
        try:
            saved = load_tuple(obj)
        except CheckpointStoreError as exc:
            messages.error(
                request, f"Cannot download {label} of checkpoint {obj.checkpoint_id}: {exc}"
            )
            return HttpResponseRedirect(
                keep_store(reverse("admin:checkpoints_checkpoint_change", args=[obj.pk]))
            )
        if saved is None:
            raise Http404(f"the saver holds no checkpoint {obj.checkpoint_id!r}")
        data = readable(_pick(saved, which, label, obj.checkpoint_id))
        del saved  # the checkpoint's other values are not needed while the file is sent
        name = _UNSAFE_IN_NAME.sub("_", f"{obj.checkpoint_id}-{label}")[:150]
        response = StreamingHttpResponse(
            _chunks(data), content_type="application/json; charset=utf-8"
        )
        response["Content-Disposition"] = content_disposition_header(True, f"{name}.json")
        return response


def _which_value(request) -> tuple[tuple[str, str | int], str]:
    """(("channel", name) or ("write", position), its label) from the query."""
    channel, write = request.GET.get("channel"), request.GET.get("write")
    if (channel is None) == (write is None):
        raise InvalidCheckpointInput(
            "name one value: channel=<channel name> or write=<position of a pending write>",
            field="channel",
        )
    if channel is not None:
        return ("channel", channel), f"channel {channel[:100]}"
    if not (write.isascii() and write.isdigit()) or len(write) > 9:
        raise InvalidCheckpointInput(
            f"write must be a pending write's position, a whole number from 0; got {write[:100]!r}",
            field="write",
        )
    return ("write", int(write)), f"write {int(write)}"


def _pick(saved, which: tuple[str, str | int], label: str, checkpoint_id: str):
    kind, key = which
    if kind == "channel":
        values = saved.checkpoint.get("channel_values") or {}
        if key not in values:
            raise Http404(f"checkpoint {checkpoint_id!r} holds no {label}")
        return values[key]
    writes = saved.pending_writes or []
    if key >= len(writes):
        raise Http404(
            f"checkpoint {checkpoint_id!r} holds {len(writes)} pending writes, no {label}"
        )
    return writes[key][2]


def _chunks(data):
    encoder = json.JSONEncoder(indent=2, ensure_ascii=False, sort_keys=False)
    piece: list[str] = []
    held = 0
    for text in encoder.iterencode(data):
        piece.append(text)
        held += len(text)
        if held >= DOWNLOAD_CHUNK:
            yield "".join(piece).encode("utf-8", "replace")
            piece, held = [], 0
    if piece:
        yield "".join(piece).encode("utf-8", "replace")
