"""One subject: the thread list and thread page (status at a glance, lineage, the tree)."""

from __future__ import annotations

import json
from functools import partial
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.utils.html import format_html, format_html_join

from checkpoints import audit, status
from checkpoints.admin import queries, subgraphs
from checkpoints.admin import tree as admin_tree
from checkpoints.admin import views as admin_views
from checkpoints.admin.base import (
    HEAD_ROWS,
    ReadOnlyMixin,
    RefuseBadInputMixin,
    StoreChoiceMixin,
    checkpoint_change_url,
    history_url,
    thread_change_url,
)
from checkpoints.admin.branches import asked_leaf
from checkpoints.admin.current_state import current_state
from checkpoints.admin.display import error_text, when
from checkpoints.admin.filters import FinishedFilter, ProviderFilter, StatusFilter
from checkpoints.admin.history_list import NAMESPACE_PARAM
from checkpoints.admin.interrupts import interrupt_node, interrupt_nodes
from checkpoints.admin.paging import IndexPaginator
from checkpoints.admin.store_choice import store_alias, store_saver
from checkpoints.channels import ERROR, INTERRUPT
from checkpoints.codec.render import content_text, is_message, words
from checkpoints.errors import CheckpointStoreError
from checkpoints.models import Thread
from checkpoints.pages import unindexed
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from checkpoints.timetravel import TimeTravel

# An error's words on a status line; the checkpoint page shows the whole message.
ERROR_CHARS = 500


# A last message's preview, in characters (the cell shows one line of it).
PREVIEW_CHARS = 200
# The channel LangGraph's MessagesState (and most chat graphs) keep the conversation in.
MESSAGES = "messages"


def ago(moment) -> str:
    """How long ago, in the few characters a list cell has: "4 min ago", "3 h ago"."""
    seconds = max(0, int((utcnow() - moment).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


def metadata_values(text: str) -> list:
    """What ``key=text`` may match: the text, and the JSON value it spells (42, true) when
    it spells one, since metadata keeps numbers as numbers."""
    found: list = [text]
    try:
        parsed = json.loads(text)
    except ValueError:
        return found
    if isinstance(parsed, (int, float, bool)) or parsed is None:
        found.append(parsed)
    return found


# Stands for a checkpoint's pk in a URL reversed once for a page of links.
PK_MARK = "0pk0"

# The most threads a status filter counts; the list says when there are more.
STATUS_COUNT_CAP = 2_000


class ThreadChangeList(ChangeList):
    """The thread list, with the waiting rows' interrupt questions read for the page."""

    # Ties in the chosen column's direction: an index on (column, last write, id) then
    # serves the list both ways (Django would break ties newest first whatever the
    # direction, and PostgreSQL would sort every thread: 89 ms by owner at 100,000).
    TIE_BREAKS = ("last_write_at", "id")

    # Filters that keep few threads, and old ones (see pages.unindexed).
    FEW = (
        ("state", "finished"),
        ("status", "finished"),
        ("status", "due"),
        ("status", "held"),
        ("status", "parked"),
        # Parks are few and on the oldest threads: walking newest first checked every
        # thread passed on the way (114-118 ms at 100,000 threads, bench.lists).
        ("park", "yes"),
    )

    def get_ordering(self, request, queryset):
        ordering = super().get_ordering(request, queryset)
        first = ordering[0] if ordering else None
        if isinstance(first, str) and first.lstrip("-") in ("owner", "last_write_at"):
            sign = "-" if first.startswith("-") else ""
            name = first.lstrip("-")
            ordering = [first, *(sign + f for f in self.TIE_BREAKS if f != name)]
            if name == "last_write_at" and any(self.params.get(k) == v for k, v in self.FEW):
                by = unindexed(name)
                ordering[0] = by.desc() if sign else by.asc()
        return ordering

    def get_results(self, request):
        super().get_results(request)
        self.count_capped = self.paginator.capped
        self.result_list = list(self.result_list)
        self.model_admin.read_questions(self.result_list)
        self.model_admin.read_claims(self.result_list)
        self.model_admin.read_last_messages(self.result_list)


class ThreadAdminExtension:
    """What another app adds to the thread admin; handed to `ThreadAdmin.extend`.

    ``fields``: names of its methods taking the thread, shown read-only on the thread page
    after the field ``after``. ``list_filter``: the list's extra filters. ``actions``: names
    of its `admin.action` methods taking (thread admin, request, queryset); an action's
    ``permissions`` are asked of the extension's ``has_<permission>_permission(request)``.
    """

    after = ""
    fields: tuple[str, ...] = ()
    list_filter: tuple = ()
    actions: tuple[str, ...] = ()

    def get_urls(self, thread_admin: ThreadAdmin) -> list:
        """URL patterns of its views, before the thread admin's own."""
        return []

    def change_context(self, thread_admin: ThreadAdmin, request, object_id: str) -> dict:
        """What the thread page's template gets from this extension."""
        return {}


@admin.register(Thread)
class ThreadAdmin(
    audit.AuditedActionsMixin,
    RefuseBadInputMixin,
    StoreChoiceMixin,
    ReadOnlyMixin,
    admin.ModelAdmin,
):
    # One line per thread at 1400 px (issue 54): when it is due and its declared retention
    # are on its page and in its markers' words; the last message is the row's last cell.
    list_display = (
        "thread_id",
        "status",
        "owner",
        "last_write_seconds",
        "checkpoint_count",
        "turns",
        "last_message",
    )
    list_filter = [
        StatusFilter,
        ("owner", admin.RelatedFieldListFilter),
        FinishedFilter,
        ProviderFilter,
    ]
    search_fields = ("thread_id",)
    search_help_text = (
        "Part of a thread id, or key=value: threads with a checkpoint whose metadata holds "
        "it (user_id=42, assistant_id=support)."
    )
    list_select_related = ("owner",)
    list_per_page = 50
    ordering = ("-last_write_at", "-id")
    # A COUNT(*) over a million-row table on every page load is the slow part; skip it.
    show_full_result_count = False
    change_form_template = "admin/checkpoints/thread/change_form.html"
    change_list_template = "admin/checkpoints/thread/change_list.html"
    fields = (
        "thread_id",
        "status_detail",
        "owner",
        "created",
        "last_write",
        "version",
        "declared_retention",
        "finished_state",
        "due_at",
        "lineage",
        "checkpoint_tree",
        "recent_checkpoints",
    )
    readonly_fields = fields
    # What other apps add (`extend`): this module never imports them, they import it.
    extensions: list[ThreadAdminExtension] = []

    @classmethod
    def extend(cls, extension: ThreadAdminExtension) -> None:
        """Add ``extension``'s fields, filters, actions, views and page context."""
        if not any(type(e) is type(extension) for e in cls.extensions):
            cls.extensions.append(extension)

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        for extension in self.extensions:
            at = fields.index(extension.after) + 1 if extension.after in fields else len(fields)
            fields[at:at] = [getattr(extension, name) for name in extension.fields]
        return fields

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def get_list_filter(self, request):
        extra = [f for extension in self.extensions for f in extension.list_filter]
        return [*super().get_list_filter(request), *extra]

    def get_actions(self, request):
        actions = super().get_actions(request)
        if IS_POPUP_VAR in request.GET:
            return actions
        for extension in self.extensions:
            for name in extension.actions:
                func = getattr(extension, name)
                needs = getattr(func, "allowed_permissions", ())
                if all(getattr(extension, f"has_{p}_permission")(request) for p in needs):
                    actions[name] = (func, name, func.short_description)
        return actions

    def get_urls(self):
        extra = [url for extension in self.extensions for url in extension.get_urls(self)]
        return [*extra, *super().get_urls()]

    def get_queryset(self, request):
        rows = super().get_queryset(request).using(store_alias())
        return status.with_status_facts(queries.with_turns(queries.with_checkpoint_count(rows)))

    def read_claims(self, rows) -> None:
        """The holds and parks on the page's rows, one read per kind of claim."""
        found = status.claims_of(
            provider=store_saver().provider, thread_ids=[r.thread_id for r in rows], now=utcnow()
        )
        for row in rows:
            row.claims = found.get(row.thread_id, {})

    def get_changelist(self, request, **kwargs):
        return ThreadChangeList

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        # Under a status filter every thread is asked the rule to be counted (idle at
        # 100,000 threads: 60-100 ms of the page); the count stops at STATUS_COUNT_CAP.
        kind = request.GET.get(StatusFilter.parameter_name)
        cap = STATUS_COUNT_CAP if kind else None
        asked = request.GET.get(PAGE_VAR, "1")
        plausible = asked.isascii() and asked.isdigit() and len(asked) < 9
        return IndexPaginator(
            queryset,
            per_page,
            orphans,
            allow_empty_first_page,
            cap=cap,
            # Django refuses a page it cannot serve; only a plausible one is read ahead.
            asked_page=int(asked) if plausible else None,
            rows_for=lambda pks: (
                self.get_queryset(request)
                .select_related(*self.list_select_related)
                .filter(pk__in=pks)
            ),
            walk=kind in status.MANY,
        )

    def read_questions(self, rows) -> None:
        """Each waiting row's interrupt question and the node that asked it (inside its
        subgraph), and each failed row's error and node, from the heads' writes at once."""
        waiting = {r.pk: r for r in rows if r.has_interrupt and not r.has_resume}
        failed = {r.pk: r for r in rows if r.has_error and r.pk not in waiting}
        saver = store_saver()
        asked = []
        for channel, chosen in ((INTERRUPT, waiting), (ERROR, failed)):
            if not chosen:
                continue
            heads = {pk: row.head_id for pk, row in chosen.items()}
            writes = queries.head_writes(alias=store_alias(), heads=heads, channel=channel)
            for thread_pk, task_id, idx, task_path, type_, blob in writes:
                row = chosen[thread_pk]
                if hasattr(row, "question") or hasattr(row, "error"):
                    continue
                try:
                    value = saver.decode_write(
                        row.thread_id, "", row.head_id, task_id, idx, channel, type_, blob
                    )
                except CheckpointStoreError:
                    continue  # the page says "an interrupt"; the thread page names the failure
                node = status.node_of(task_path)
                if channel == INTERRUPT:
                    row.question, row.node = status.question_of(value), node
                    asked.append((thread_pk, task_id, node))
                else:
                    row.error = error_text(value, node)[:ERROR_CHARS]
        for thread_pk, path in interrupt_nodes(asked).items():
            waiting[thread_pk].node = path

    def read_last_messages(self, rows) -> None:
        """Each row's last message in one line: the newest write on ``messages``, not the
        head (whose list may hold the whole conversation)."""
        saver = store_saver()
        by_pk = {r.pk: r for r in rows}
        found = queries.last_writes(alias=store_alias(), thread_pks=by_pk, channel=MESSAGES)
        for thread_pk, checkpoint_id, task_id, idx, type_, blob in found:
            row = by_pk[thread_pk]
            try:
                value = saver.decode_write(
                    row.thread_id, "", checkpoint_id, task_id, idx, MESSAGES, type_, blob
                )
            except CheckpointStoreError as exc:
                row.last_message = ("", f"unreadable: {exc}")
                continue
            last = value[-1] if isinstance(value, (list, tuple)) and value else value
            who = getattr(last, "type", "") if is_message(last) else ""
            text = content_text(last.content) if who else words(last)
            row.last_message = (who, " ".join(text.split())[:PREVIEW_CHARS])

    def head_details(self, obj) -> dict[str, str]:
        """The interrupt's question and node, or the error, read from the head's writes."""
        if not (obj.has_interrupt or obj.has_error):
            return {}
        try:
            head = store_saver().get_tuple({"configurable": {"thread_id": obj.thread_id}})
        except CheckpointStoreError as exc:
            return {"error": f"cannot read the head checkpoint: {exc}"}
        paths = queries.task_paths(alias=store_alias(), thread_pk=obj.pk, checkpoint_id=obj.head_id)
        found: dict[str, str] = {}
        for task_id, channel, value in (head.pending_writes if head else []) or []:
            node = status.node_of(paths.get(task_id, ""))
            if channel == INTERRUPT and "question" not in found:
                found["question"] = status.question_of(value)
                found["node"] = interrupt_node(obj.pk, "", task_id, node)
            elif channel == ERROR and "error" not in found:
                found["error"] = error_text(value, node)[:ERROR_CHARS]
        return found

    def status_of(self, obj, *, detailed: bool) -> status.ThreadStatus:
        return status.row_status(obj, now=utcnow(), **self._facts(obj, detailed=detailed))

    def markers_of(self, obj, *, detailed: bool) -> list[status.Marker]:
        return status.row_markers(obj, now=utcnow(), **self._facts(obj, detailed=detailed))

    def _facts(self, obj, *, detailed: bool) -> dict:
        """What the rule reads beside the row: claims, the head's question or error."""
        if detailed:
            details = self.head_details(obj)
        else:
            # The list read the waiting rows' questions for the whole page (read_questions).
            details = {
                "question": getattr(obj, "question", ""),
                "node": getattr(obj, "node", ""),
                "error": getattr(obj, "error", ""),
            }
        if not hasattr(obj, "claims"):
            self.read_claims([obj])
        return {
            "claims": obj.claims,
            "question": details.get("question", ""),
            "node": details.get("node", ""),
            "error": details.get("error", ""),
        }

    @admin.display(description="status")
    def status(self, obj):
        """Every marker as a badge (its detail on hover), then the first marker's detail
        (else how recent) cut to the row's one line; a waiting thread's question gets a
        line of its own."""
        markers = self.markers_of(obj, detailed=False)
        if not markers:
            found = self.status_of(obj, detailed=False)
            markers = [status.Marker(found.kind, found.detail)]
        asks = [m for m in markers if m.kind == "waiting_on_human"]
        line = (asks or markers)[0].detail
        return format_html(
            '{}<span class="cs-oneline cs-muted{}" title="{}">{}</span>',
            self._badges(markers),
            " cs-question" if asks else "",
            line,
            line,
        )

    @staticmethod
    def _badges(markers):
        return format_html_join(
            "",
            '<span class="cs-status cs-status-{}" title="{}">{}</span> ',
            (
                (m.kind, m.detail, status.MARKERS.get(m.kind) or status.KINDS[m.kind])
                for m in markers
            ),
        )

    @admin.display(description="status")
    def status_detail(self, obj):
        # The thread page also reads the interrupt's question and node, or the error; each
        # marker on its own line, with its whole detail.
        markers = self.markers_of(obj, detailed=True)
        if not markers:
            found = self.status_of(obj, detailed=True)
            markers = [status.Marker(found.kind, found.detail)]
        return format_html(
            '<ul class="cs-markers">{}</ul>',
            format_html_join(
                "",
                '<li><span class="cs-status cs-status-{}">{}</span> '
                '<span class="cs-muted">{}</span></li>',
                (
                    (m.kind, status.MARKERS.get(m.kind) or status.KINDS[m.kind], m.detail)
                    for m in markers
                ),
            ),
        )

    @admin.display(description="last activity", ordering="last_write_at")
    def last_write_seconds(self, obj):
        if obj.last_write_at is None:
            return "never"
        return format_html(
            '<span title="{}">{}</span>', when(obj.last_write_at), ago(obj.last_write_at)
        )

    @admin.display(description="turns", ordering="turns")
    def turns(self, obj):
        return obj.turns

    @admin.display(description="last message")
    def last_message(self, obj):
        who, text = getattr(obj, "last_message", ("", ""))
        if not text:
            return "—"
        return format_html(
            '<span class="cs-oneline cs-preview" title="{}"><span class="cs-role">{}</span> {}'
            "</span>",
            text,
            who,
            text,
        )

    # The thread page's dates in the console's one format (Django's own reads "Jan. 2, 2026").
    @admin.display(description="created")
    def created(self, obj):
        return when(obj.created_at)

    @admin.display(description="last write")
    def last_write(self, obj):
        return when(obj.last_write_at)

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        key, eq, value = term.partition("=")
        if eq and key.strip():
            values = metadata_values(value.strip())
            found = queries.threads_with_metadata(
                alias=store_alias(), key=key.strip(), values=values
            )
            return queryset.filter(pk__in=found), False
        # Any part of an id: a scan of the ids, where a prefix kept to the unique index.
        return queryset.filter(thread_id__contains=term), False

    @admin.display(description="checkpoints", ordering="checkpoint_count")
    def checkpoint_count(self, obj):
        return format_html('<a href="{}">{}</a>', history_url(obj.pk), obj.checkpoint_count)

    @admin.display(description="finished", boolean=True)
    def finished_state(self, obj):
        return obj.finished_due_at is not None

    @admin.display(description="due at")
    def due_at(self, obj):
        if obj.finished_due_at is None:
            return "—"
        owner = f" (marked by {obj.finished_owner})" if obj.finished_owner else ""
        return f"{when(obj.finished_due_at)}{owner}"

    @admin.display(description="declared retention")
    def declared_retention(self, obj):
        if obj.waiting_minutes is None and obj.finished_minutes is None:
            return "platform default"
        waiting = obj.waiting_minutes if obj.waiting_minutes is not None else "default"
        finished = obj.finished_minutes if obj.finished_minutes is not None else "default"
        return f"waiting {waiting} min, finished {finished} min"

    @admin.display(description="lineage (forked from)")
    def lineage(self, obj):
        try:
            steps = TimeTravel(store_saver()).lineage(obj.thread_id)
        except CheckpointStoreError as exc:
            return f"unavailable: {exc}"
        if len(steps) < 2:
            return "an original thread (not a fork)"
        return format_html_join(
            " ← ",
            "{}",
            ((admin_views.checkpoint_link(s["thread_id"], s["checkpoint_id"]),) for s in steps),
        )

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            # The tree's window is a property of the page asked for, not of the thread.
            obj.tree_page = admin_tree.asked_window(request.GET)
            obj.calls_page = subgraphs.asked_page(request.GET)
        return obj

    @admin.display(description="checkpoint tree")
    def checkpoint_tree(self, obj):
        """The root graph's tree, then its subgraph calls folded by node; a call's own tree
        only when the page asks for it (a thread of 1,000 calls drew 1,000 boxes)."""
        drawn = []
        page_ns, before = getattr(obj, "tree_page", ("", None))
        calls = self.calls_of(obj)
        asked_call = subgraphs.call_of(page_ns, calls) if page_ns else None
        windows = queries.checkpoint_windows(
            alias=store_alias(),
            thread_pk=obj.pk,
            window=admin_tree.WINDOW,
            page_ns=page_ns,
            before=before,
            namespaces=["", asked_call.ns] if asked_call else [""],
        )
        for ns, rows, older, newer in windows:
            # Forks start from the root namespace only.
            forks = [
                (origin, tid, thread_change_url(pk))
                for origin, pk, tid in (
                    [] if ns else queries.forks_from(alias=store_alias(), thread_id=obj.thread_id)
                )
            ]
            links = dict(newer) | {row[1]: row[2] for row in rows}
            head_id = newer[-1][0] if newer else (rows[0][1] if rows else None)
            title = f"{asked_call.name}: namespace {ns}" if ns else "root namespace"
            drawn.append(
                format_html(
                    '<div class="cs-tree-ns" id="{}"><strong>{}</strong>{}</div>',
                    admin_tree.anchor(ns),
                    title,
                    admin_tree.draw(
                        [admin_tree.Node(*row) for row in rows],
                        head_id=head_id,
                        link=checkpoint_change_url,
                        label=f"checkpoints of thread {obj.thread_id}, {title}",
                        truncated=0 if newer else older,
                        forks=forks,
                        path=admin_tree.head_path(links, head_id),
                        pager=admin_tree.pager(
                            thread_change_url(obj.pk),
                            ns=ns,
                            shown=[row[1] for row in rows],
                            older=older,
                            newer=[cid for cid, _ in newer],
                            history=history_url(obj.pk),
                        ),
                        legend=not drawn,
                    ),
                )
            )
        drawn.append(self._calls(obj, calls))
        return format_html_join("", "{}", ((d,) for d in drawn))

    def calls_of(self, obj) -> dict[str, list[subgraphs.Call]]:
        """The thread's subgraph calls by node, read once for the page's fields."""
        if not hasattr(obj, "subgraph_calls"):
            rows = queries.subgraph_namespaces(alias=store_alias(), thread_pk=obj.pk)
            obj.subgraph_calls = subgraphs.calls_by_node(rows)
        return obj.subgraph_calls

    def _calls(self, obj, calls):
        base = thread_change_url(obj.pk)
        alias = store_alias()

        history = history_url(obj.pk)
        # One reverse() for the page's links, not one per link (50 calls: 20 ms).
        checkpoint_url = checkpoint_change_url(PK_MARK)

        def links(call):
            listed = f"{history}&{urlencode({NAMESPACE_PARAM: call.ns})}"
            return admin_tree.window_url(base, call.ns, None), listed

        return subgraphs.calls_html(
            calls,
            asked=getattr(obj, "calls_page", ("", 1)),
            base=base,
            origins=lambda shown: queries.call_origins(
                alias=alias, thread_pk=obj.pk, firsts=[(c.ns, c.first_id) for c in shown]
            ),
            links=links,
            checkpoint_link=lambda pk: checkpoint_url.replace(PK_MARK, str(pk)),
        )

    @admin.display(description="newest checkpoints")
    def recent_checkpoints(self, obj):
        rows = queries.newest_checkpoints(alias=store_alias(), thread_pk=obj.pk, limit=HEAD_ROWS)
        if not rows:
            return "no checkpoints"
        calls = self.calls_of(obj)

        def where(ns: str) -> str:
            # Steps restart in every call: "act #37" says which call a step belongs to.
            call = subgraphs.call_of(ns, calls) if ns else None
            return call.name if call else subgraphs.node_path(ns)

        body = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td class="cs-ns" title="{}">{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td></tr>",
            (
                (checkpoint_change_url(pk), cid, ns, where(ns), source or "—", step, when(created))
                for pk, cid, source, step, created, ns in rows
            ),
        )
        return format_html(
            '<table class="cs-table"><thead><tr><th>checkpoint</th><th>namespace</th>'
            "<th>source</th><th>step</th><th>written</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">Full history ({})</a></p>',
            body,
            history_url(obj.pk),
            obj.checkpoint_count,
        )

    def changelist_view(self, request, extra_context=None):
        saver = get_saver()
        provider = saver.provider
        if saver.db_alias is None:
            # Only the ORM providers keep these tables; say so instead of an empty page.
            self.message_user(
                request,
                f"This deployment keeps its checkpoints in {provider}; the thread list reads "
                "the database tables of the postgres and sqlite stores, so it shows none of "
                "them. The sweep page still works on this store.",
                messages.WARNING,
            )
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {
            "history_url": history_url(object_id),
            # Read when the page renders, after Django has checked the user may see it.
            "current_state": partial(current_state, object_id, asked_leaf(request.GET)),
        }
        for extension in self.extensions:
            extra.update(extension.change_context(self, request, object_id))
        extra.update(extra_context or {})
        return super().change_view(request, object_id, form_url, extra)
