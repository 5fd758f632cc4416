"""Subgraph calls on the thread page: each subgraph namespace (``act:<task id>``) is one
call of a node, named by the node and its call number (``act #37``), grouped by node and
folded ("175 calls of act"), and listed a page at a time under the step of the root graph
that ran it. A thread of a thousand calls is a page of bounded size: the calls are read as
one grouped row each, and only the shown page's origins are looked up."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from urllib.parse import urlencode

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

# Calls listed per page of one node's calls.
CALLS_PAGE = 50
# The thread page's query parameters: the node whose calls are paged, and which page.
NODE_PARAM, PAGE_PARAM = "calls", "calls_page"


def node_path(ns: str) -> str:
    """A namespace as the nodes it runs under: ``review:1f0…|ask:2a1…`` -> ``review › ask``."""
    if not ns:
        return "root"
    return " › ".join(part.partition(":")[0] for part in ns.split("|"))


@dataclass(frozen=True)
class Call:
    ns: str
    node: str
    number: int
    checkpoints: int
    first_id: str
    last_id: str

    @property
    def name(self) -> str:
        return f"{self.node} #{self.number}"


def calls_by_node(rows: Iterable[tuple[str, int, str, str]]) -> dict[str, list[Call]]:
    """node path -> its calls numbered from 1 in the order they began, from
    `queries.subgraph_namespaces`' rows (already in that order); nodes in the order of
    their first call."""
    found: dict[str, list[Call]] = {}
    for ns, count, first, last in rows:
        node = node_path(ns)
        calls = found.setdefault(node, [])
        calls.append(Call(ns, node, len(calls) + 1, count, first, last))
    return found


def call_of(ns: str, calls: Mapping[str, Sequence[Call]]) -> Call | None:
    for call in calls.get(node_path(ns), ()):
        if call.ns == ns:
            return call
    return None


def asked_page(query: Mapping[str, str]) -> tuple[str, int]:
    """(node, page number from 1) of the calls the page asks for; ("", 1) when none."""
    node, page = query.get(NODE_PARAM, ""), query.get(PAGE_PARAM, "1")
    number = int(page) if page.isascii() and page.isdigit() and len(page) < 7 else 1
    return ("" if "\x00" in node else node), max(number, 1)


def page_url(base: str, node: str, page: int) -> str:
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}{urlencode({NODE_PARAM: node, PAGE_PARAM: page})}#cs-calls"


def calls_html(
    calls: Mapping[str, Sequence[Call]],
    *,
    asked: tuple[str, int],
    base: str,
    origins: Callable[[list[Call]], Mapping[str, tuple[int, str, int | None, str]]],
    links: Callable[[Call], tuple[str, str]],
    checkpoint_link: Callable[[int], str],
) -> SafeString:
    """Each node's calls folded under one summary; the open page's calls grouped under the
    root step that ran them. ``origins(calls)``: namespace -> (pk, id, step, source) of the
    root checkpoint each ran from; ``links(call)``: (its tree on this page, its history)."""
    if not calls:
        return mark_safe("")
    asked_node, asked_number = asked
    blocks = []
    for node, node_calls in calls.items():
        pages = max(1, -(-len(node_calls) // CALLS_PAGE))
        number = min(asked_number, pages) if node == asked_node else 1
        shown = node_calls[(number - 1) * CALLS_PAGE : number * CALLS_PAGE]
        found = origins(shown)
        rows = []
        for origin, group in groupby(shown, key=lambda c: found.get(c.ns)):
            group = list(group)
            if origin is None:
                head = format_html("{}", "a step not recorded")
            else:
                pk, cid, step, source = origin
                head = format_html(
                    'step {} ({}) · <a href="{}">checkpoint {}</a>',
                    "?" if step is None else step,
                    source or "?",
                    checkpoint_link(pk),
                    cid,
                )
            for n, call in enumerate(group):
                # The step that ran the calls spans their rows: the calls nest under it.
                step_cell = (
                    format_html('<td class="cs-call-step" rowspan="{}">{}</td>', len(group), head)
                    if n == 0
                    else ""
                )
                rows.append(
                    format_html(
                        '<tr class="cs-call" data-ns="{}">{}<td class="cs-call-name">{}</td>'
                        '<td>{} checkpoints</td><td><a href="{}">tree</a> · '
                        '<a href="{}">history</a></td><td class="cs-ns" title="{}">{}</td></tr>',
                        call.ns,
                        step_cell,
                        call.name,
                        call.checkpoints,
                        *links(call),
                        call.ns,
                        call.ns.rpartition(":")[2][:8] + "…",
                    )
                )
        pager = []
        if number > 1:
            pager.append(
                format_html('<a href="{}">← earlier calls</a>', page_url(base, node, number - 1))
            )
        if number < pages:
            pager.append(
                format_html('<a href="{}">later calls →</a>', page_url(base, node, number + 1))
            )
        total = sum(c.checkpoints for c in node_calls)
        count = f"{len(node_calls)} call" + ("" if len(node_calls) == 1 else "s")
        blocks.append(
            format_html(
                '<details class="cs-calls-node" data-node="{}"{}><summary><strong>{} of {}'
                '</strong> <span class="cs-muted">{} checkpoints</span></summary>'
                '<table class="cs-table cs-calls-table"><thead><tr><th>ran at the root step'
                "</th><th>call</th><th>checkpoints</th><th></th><th>task</th></tr></thead>"
                "<tbody>{}</tbody></table>"
                '<p class="cs-tree-pager">Calls {}–{} of {}{}{}</p></details>',
                node,
                mark_safe(" open") if node == asked_node else "",
                count,
                node,
                total,
                format_html_join("", "{}", ((r,) for r in rows)),
                shown[0].number if shown else 0,
                shown[-1].number if shown else 0,
                len(node_calls),
                ": " if pager else "",
                format_html_join(" · ", "{}", ((p,) for p in pager)),
            )
        )
    return format_html(
        '<div class="cs-calls" id="cs-calls"><p class="cs-muted">Subgraph calls, each under '
        "the step of the root graph that ran it:</p>{}</div>",
        format_html_join("", "{}", ((b,) for b in blocks)),
    )
