"""Compare any two checkpoints: what the state holds at B that it did not at A.

Reached from the history (tick two rows, "Compare the two selected checkpoints") or from a
checkpoint's "what changed" page. ``a`` and ``b`` name checkpoints by their admin id; ``b``
may also be a checkpoint id, looked up in A's thread (A's namespace first). The two may be
of different threads (a fork and its source) or namespaces.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse

from checkpoints.admin import queries
from checkpoints.admin.display import Paging, is_internal, shown_change
from checkpoints.admin.store_choice import keep_store, store_alias
from checkpoints.admin.views import _CheckpointPage, _summary, bad_request, load_tuple
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput
from checkpoints.models import Checkpoint
from checkpoints.timetravel.diff import channel_changes

# The picker on a compare page with only A offers this many of A's newest neighbours.
PICK_ROWS = 30


def compare_url(a_pk, b_pk=None) -> str:
    """The compare page of ``a_pk`` against ``b_pk`` (the picker when None)."""
    query = {"a": a_pk} if b_pk is None else {"a": a_pk, "b": b_pk}
    url = reverse("admin:checkpoints_checkpoint_compare") + "?" + urlencode(query)
    return keep_store(url)


def ordered_pair(rows: list[Checkpoint]) -> tuple[Checkpoint, Checkpoint]:
    """Two checkpoints, older first: checkpoint ids are time-ordered across threads too."""
    first, second = sorted(rows, key=lambda r: (r.checkpoint_id, r.pk))
    return first, second


class CompareView(_CheckpointPage):
    template = "compare.html"

    def __call__(self, request):
        if "a" not in request.GET and "b" not in request.GET:
            # The bare page (a bookmark, the admin's own URL list): say how to get here.
            self.model_admin.message_user(
                request,
                "To compare two checkpoints, tick them in a thread's history and choose "
                "“Compare the two selected checkpoints”, or open a checkpoint's "
                "“compare with” link.",
                messages.INFO,
            )
            return HttpResponseRedirect(
                keep_store(reverse("admin:checkpoints_checkpoint_changelist"), changelist=True)
            )
        try:
            paging = Paging.of(request)
            a_raw = _param(request, "a")
        except InvalidCheckpointInput as exc:
            return bad_request(exc)
        a = self._row(request, a_raw, "a")
        b_raw = (request.GET.get("b") or "").strip()
        if not b_raw:
            return self._picker(request, a)
        b = self._row(request, b_raw, "b", beside=a)
        try:
            saved = [load_tuple(row) for row in (a, b)]
        except CheckpointStoreError as exc:
            # Stored rows that do not read are not the request's fault: say so on A's page.
            messages.error(
                request,
                f"Cannot compare checkpoint {a.checkpoint_id} with {b.checkpoint_id}: {exc}",
            )
            return HttpResponseRedirect(
                keep_store(reverse("admin:checkpoints_checkpoint_change", args=[a.pk]))
            )
        for row, found in zip((a, b), saved, strict=True):
            if found is None:
                raise Http404(f"the saver holds no checkpoint {row.checkpoint_id!r}")
        before, after = (s.checkpoint.get("channel_values") or {} for s in saved)
        changes = channel_changes(before, after)
        # LangGraph's bookkeeping (branch:to:*) is folded away, as on the checkpoint page.
        internal = [c for c in changes if is_internal(c.channel)]
        changes = [c for c in changes if not is_internal(c.channel)]
        return self.render(
            request,
            a,
            title=f"Checkpoint {a.checkpoint_id} against {b.checkpoint_id}",
            a=_summary(a),
            b=_summary(b),
            same_thread=a.thread_id == b.thread_id,
            swap_url=compare_url(b.pk, a.pk),
            changes=[shown_change(c, paging) for c in changes],
            internal_changes=[shown_change(c, paging) for c in internal],
            unchanged=sorted(
                c for c in set(after) - {c.channel for c in changes} if not is_internal(c)
            ),
            before_label="A",
            after_label="B",
            nothing_text="The two checkpoints hold the same state.",
        )

    def _row(self, request, raw: str, name: str, beside: Checkpoint | None = None) -> Checkpoint:
        """The checkpoint ``raw`` names: an admin id, or (for B) a checkpoint id of A's thread."""
        row = None
        if raw.isascii() and raw.isdigit() and len(raw) <= 18:
            row = self.model_admin.get_object(request, raw)
        if row is None and beside is not None:
            row = _by_checkpoint_id(beside, raw)
            if row is not None:
                row = self.model_admin.get_object(request, str(row.pk))
        if row is None:
            raise Http404(f"{name}: no checkpoint {raw[:100]!r} in this store")
        if not self.model_admin.has_view_permission(request, row):
            raise PermissionDenied
        return row

    def _picker(self, request, a: Checkpoint):
        rows = (
            queries.checkpoint_rows(alias=store_alias())
            .filter(thread_id=a.thread_id, checkpoint_ns=a.checkpoint_ns)
            .exclude(pk=a.pk)
            .order_by("-checkpoint_id")
            .values_list("pk", "checkpoint_id", "source", "step")[:PICK_ROWS]
        )
        return self.render(
            request,
            a,
            title=f"Compare checkpoint {a.checkpoint_id} with…",
            a=_summary(a),
            b=None,
            choices=[
                {"url": compare_url(a.pk, pk), "checkpoint_id": cid, "source": src, "step": step}
                for pk, cid, src, step in rows
            ],
            action=reverse("admin:checkpoints_checkpoint_compare"),
        )


def _param(request, name: str) -> str:
    raw = (request.GET.get(name) or "").strip()
    if not raw:
        raise InvalidCheckpointInput(
            f"{name} is required: the admin id or checkpoint id of a checkpoint", field=name
        )
    return raw


def _by_checkpoint_id(beside: Checkpoint, checkpoint_id: str) -> Checkpoint | None:
    """The checkpoint ``checkpoint_id`` of ``beside``'s thread, its namespace first."""
    rows = queries.checkpoint_rows(alias=store_alias()).filter(
        thread_id=beside.thread_id, checkpoint_id=checkpoint_id
    )
    same_ns = rows.filter(checkpoint_ns=beside.checkpoint_ns).first()
    return same_ns or rows.order_by("checkpoint_ns").first()
