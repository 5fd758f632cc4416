"""The checkpoint list: a thread's history paged by keyset, its "jump to" form, its
namespace filter, and for each row the node(s) that wrote it and the branch it is on, read
for the page at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time

from django.contrib import admin, messages
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from checkpoints import status
from checkpoints.admin import keyset, queries, subgraphs
from checkpoints.admin.store_choice import store_alias

# Query parameters the history's "jump to" form sends (see change_list.html).
JUMPS = ("step__lte", "created_at__lte")
THREAD_PARAM = "thread__id__exact"
# The namespace filter's values besides a namespace itself (a real one always holds ":").
ROOT, SUBGRAPHS = "root", "subgraphs"
NAMESPACE_PARAM = "namespace"
# The namespace filter's value for every call of a node: ``act:*``.
NODE_SUFFIX = ":*"
# Branches are traced through at most this many checkpoints newer than a page's oldest row;
# rows deeper than that show no branch (tracing them would read the whole thread).
BRANCH_SCAN = 4_000


# A namespace as the nodes it runs under: ``review:1f0…|ask:2a1…`` -> ``review › ask``.
namespace_words = subgraphs.node_path


class NamespaceFilter(admin.SimpleListFilter):
    """The root namespace, every subgraph's, one node's subgraph calls (``act:*``: every
    call of ``act``, nested ones included), or one call's namespace. A thread's history
    offers its nodes with their call counts, not one choice per call (175 calls of one
    node made 175 choices)."""

    title = "namespace"
    parameter_name = NAMESPACE_PARAM

    def lookups(self, request, model_admin):
        choices = [(ROOT, "root (the graph itself)"), (SUBGRAPHS, "subgraphs (any)")]
        thread_pk = request.GET.get(THREAD_PARAM, "")
        if thread_pk.isascii() and thread_pk.isdigit() and len(thread_pk) <= 18:
            rows = queries.subgraph_namespaces(alias=store_alias(), thread_pk=int(thread_pk))
            calls = subgraphs.calls_by_node(rows)
            for node, node_calls in calls.items():
                if " › " in node:
                    continue  # nested calls are counted under their top node's choice
                many = f"{len(node_calls)} call" + ("" if len(node_calls) == 1 else "s")
                choices.append((f"{node}{NODE_SUFFIX}", f"{node}: {many}"))
            chosen = self.value() or ""
            call = subgraphs.call_of(chosen, calls) if ":" in chosen else None
            if call is not None and not chosen.endswith(NODE_SUFFIX):
                choices.append((chosen, f"{call.name} · {chosen}"))
        return choices

    def queryset(self, request, queryset):
        chosen = self.value()
        if chosen is None:
            return queryset
        if chosen == ROOT:
            return queryset.filter(checkpoint_ns="")
        if chosen == SUBGRAPHS:
            return queryset.exclude(checkpoint_ns="")
        if chosen.endswith(NODE_SUFFIX):
            # A real namespace ends in a task id, never in "*".
            return queryset.filter(checkpoint_ns__startswith=chosen[: -len(NODE_SUFFIX)] + ":")
        return queryset.filter(checkpoint_ns=chosen)


@dataclass(frozen=True)
class Branch:
    """The line of checkpoints a row is on: ``number`` 1 is the line that ends at its
    namespace's head (the current one); the others end at an older tip, replaced by a
    rollback or left behind by a replay or an update."""

    number: int
    tip: str
    replaced_by_rollback: bool = False
    splits: bool = False  # more than one line leaves this row

    @property
    def current(self) -> bool:
        return self.number == 1

    @property
    def words(self) -> str:
        if self.current:
            said = "current branch"
        elif self.replaced_by_rollback:
            said = f"branch {self.number} · replaced by a rollback"
        else:
            said = f"branch {self.number} · ends at {self.tip[-12:]}"
        return f"{said} · branches here" if self.splits else said


def trace_branches(links: list[tuple[str, str | None, str, object]]) -> dict[str, Branch]:
    """The branch of each checkpoint in ``links`` (newest first, the first is the head).

    Children are always newer than their parent, so walking newest first meets every child
    before its parent: a row with no child starts a branch (the head the first), and a row
    takes the branch of its child, the current one when any child is on it.
    """
    replaced = {
        str(meta.get("replaced_head"))
        for _cid, _parent, source, meta in links
        if source == "rollback" and isinstance(meta, dict)
    }
    children: dict[str, list[Branch]] = {}
    found: dict[str, Branch] = {}
    count = 0
    for checkpoint_id, parent_id, _source, _meta in links:
        below = children.get(checkpoint_id, [])
        if below:
            line = min(below, key=lambda b: b.number)
            branch = Branch(line.number, line.tip, line.replaced_by_rollback, len(below) > 1)
        else:
            count += 1
            branch = Branch(count, checkpoint_id, checkpoint_id in replaced)
        found[checkpoint_id] = branch
        if parent_id:
            children.setdefault(parent_id, []).append(branch)
    return found


class HistoryChangeList(ChangeList):
    """The checkpoint list, with the node(s) that wrote each row read for the page at once.

    A thread's history (``thread__id__exact``) is paged by keyset (see `keyset`): the
    cursors and the jump fields position the page; they never filter the rows.
    """

    def __init__(self, request, *args, **kwargs):
        self.keyset = THREAD_PARAM in request.GET
        self.jump_target = None
        super().__init__(request, *args, **kwargs)

    def get_ordering(self, request, queryset):
        # Django applies an order asked for in the URL even on a column that is not
        # sortable (no header link offers it); keep only the sortable ones.
        asked = self.params.get(ORDER_VAR)
        if asked:
            kept = [p for p in asked.split(".") if self._sortable(p)]
            if kept:
                self.params[ORDER_VAR] = ".".join(kept)
            else:
                del self.params[ORDER_VAR]
        return super().get_ordering(request, queryset)

    def _sortable(self, param: str) -> bool:
        try:
            return self.list_display[int(param.rpartition("-")[2])] in self.sortable_by
        except (IndexError, ValueError):
            return False

    def get_filters_params(self, params=None):
        lookup_params = super().get_filters_params(params)
        if self.keyset:
            for name in (*keyset.CURSORS, *JUMPS):
                lookup_params.pop(name, None)
        return lookup_params

    def get_results(self, request):
        self.count_capped = False
        if self.keyset:
            self._keyset_results(request)
        else:
            super().get_results(request)
            self.count_capped = self.paginator.capped
        self._read_nodes()
        if self.keyset:
            self._read_branches()
            self._read_calls()

    def _keyset_results(self, request):
        get = request.GET
        target = self._jump_target(request)
        found = keyset.page(
            self.queryset.order_by(),
            size=self.list_per_page,
            before=None if target else get.get(keyset.BEFORE) or None,
            after=None if target else get.get(keyset.AFTER) or None,
            at=target,
        )
        self.jump_target = target
        for row in found.rows:
            row.is_jump_target = row.checkpoint_id == target
        # Not PAGE_VAR: Django removes every parameter *starting* with a removed name.
        drop = [*keyset.CURSORS, *JUMPS]
        self.older_url = (
            self.get_query_string({keyset.BEFORE: found.older}, remove=drop)
            if found.older
            else None
        )
        self.newer_url = (
            self.get_query_string({keyset.AFTER: found.newer}, remove=drop) if found.newer else None
        )
        self.newest_url = (
            self.get_query_string(remove=drop)
            if any(name in get for name in (*keyset.CURSORS, *JUMPS))
            else None
        )
        # Counting one thread's rows walks its part of the key index: cheap, and worth it.
        self.result_count = self.queryset.order_by().count()
        self.full_result_count = None
        self.show_full_result_count = False
        self.show_admin_actions = True
        self.result_list = found.rows
        self.can_show_all = False
        self.show_all = False
        self.multi_page = bool(found.older or found.newer)
        self.paginator = None

    def _jump_target(self, request) -> str | None:
        """The checkpoint id the jump form names: the newest at or before that step/time."""
        step, moment = (
            request.GET.get("step__lte", "").strip(),
            request.GET.get("created_at__lte", "").strip(),
        )
        if not step and not moment:
            return None
        rows = self.queryset.order_by("-checkpoint_id", "-pk")
        if step:
            try:
                rows = rows.filter(step__lte=int(step))
            except ValueError:
                messages.error(request, f"Jump to step: {step!r} is not a whole number.")
                return None
        if moment:
            when = parse_moment(moment)
            if when is None:
                messages.error(
                    request,
                    f"Jump to time: {moment!r} is not a date and time like 2026-12-01 14:05:00.",
                )
                return None
            try:
                # The database compares in UTC: an offset can carry a time past year 1 or 9999.
                when = when.astimezone(UTC)
            except OverflowError:
                messages.error(
                    request,
                    f"Jump to time: {moment!r} is out of range; times run from "
                    "0001-01-01 00:00:00 to 9999-12-31 23:59:59 UTC.",
                )
                return None
            rows = rows.filter(created_at__lte=when)
        target = rows.values_list("checkpoint_id", flat=True).first()
        if target is None:
            asked = " and ".join(
                text
                for text in (f"step {step}" if step else "", f"{moment}" if moment else "")
                if text
            )
            messages.warning(
                request, f"No checkpoint of this thread at or before {asked}; showing the oldest."
            )
            oldest = self.queryset.order_by("checkpoint_id").values_list("checkpoint_id", flat=True)
            return oldest.first()
        return target

    def _read_nodes(self):
        rows = list(self.result_list)
        # Rows the store's own operations wrote (rollback, fork, bulk update) say so in their
        # metadata; their parent's writes are the tasks that wrote the parent's *first*
        # child, another row. An input row was written by the caller, not by a node.
        stated = {r.pk: _stated_writers(r) for r in rows}
        parents = {
            (r.thread_id, r.checkpoint_ns, r.parent_checkpoint_id)
            for r in rows
            if stated[r.pk] is None
        }
        parents = {p for p in parents if p[2]}
        nodes: dict[tuple, list[str]] = {}
        found = queries.writers_of(alias=store_alias(), checkpoints=parents)
        for thread_pk, ns, checkpoint_id, task_path in found:
            node = status.node_of(task_path)
            names = nodes.setdefault((thread_pk, ns, checkpoint_id), [])
            if node and node not in names:
                names.append(node)
        links: dict[int, str] = {}
        for row in rows:
            key = (row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
            row.nodes = stated[row.pk] or sorted(nodes.get(key, []))
            row.thread_links = links

    def _read_calls(self):
        """Each subgraph row's call, named as the thread page names it (``act #37``): steps
        restart in every call, so the node alone does not say which call a row is in."""
        rows = [r for r in self.result_list if r.checkpoint_ns]
        for thread_pk in {r.thread_id for r in rows}:
            calls = subgraphs.calls_by_node(
                queries.subgraph_namespaces(alias=store_alias(), thread_pk=thread_pk)
            )
            for row in rows:
                if row.thread_id == thread_pk:
                    call = subgraphs.call_of(row.checkpoint_ns, calls)
                    row.call_name = call.name if call else None

    def _read_branches(self):
        """Each row's branch, traced per namespace from its head down to the page's rows."""
        rows = list(self.result_list)
        places: dict[tuple[int, str], list] = {}
        for row in rows:
            places.setdefault((row.thread_id, row.checkpoint_ns), []).append(row)
        for (thread_pk, ns), shown in places.items():
            links = queries.lineage_links(
                alias=store_alias(),
                thread_pk=thread_pk,
                ns=ns,
                since=min(r.checkpoint_id for r in shown),
                limit=BRANCH_SCAN,
            )
            branches = trace_branches(links)
            for row in shown:
                row.branch = branches.get(row.checkpoint_id)


def row_metadata(row) -> dict:
    """A checkpoint row's metadata; {} when the stored JSON is not an object (a row altered
    in the database), so the pages built on it still show."""
    return row.metadata if isinstance(row.metadata, dict) else {}


def _stated_writers(row) -> list[str] | None:
    """Who wrote ``row`` when its metadata or source says so, else None (ask the parent)."""
    meta = row_metadata(row)
    written = meta.get("written_by")
    if isinstance(written, list) and written:
        names = [str(w) for w in written]
        rollback = meta.get("rollback")
        if row.source == "rollback" and isinstance(rollback, dict) and rollback.get("target"):
            return [f"{name} to {str(rollback['target'])[-12:]}" for name in names]
        return names
    if row.source == "input":
        return ["input"]
    return None


def parse_moment(text: str):
    """An aware datetime from ``2026-12-01 14:05[:00]`` or a date (its end); None if not."""
    text = text.strip().replace("T", " ")
    try:
        moment = parse_datetime(text)
        day = None if moment is not None else parse_date(text)
    except ValueError:
        return None
    if moment is None:
        if day is None:
            return None
        moment = datetime.combine(day, time.max)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment
