"""A thread's checkpoints drawn as a tree, in inline SVG made on the server.

Time runs left to right (checkpoint ids are time-ordered). The head's path keeps the top
lane; every other branch (the path a rollback, a replay or an update abandoned) gets a lane
of its own, never shared, so a branch reads as one line. An edge into another lane drops
halfway between two columns, where no node stands. Only a window of ``WINDOW`` checkpoints
is drawn (the newest, with the head, unless the page asks for an older one), so a thread
of any length gives a picture of bounded size; the page links to the windows around it.
Every node links to its checkpoint's page and shows its step; each thread forked from a
drawn checkpoint gets a row and a mark of its own that links to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WINDOW = 60
STEP_X = 30
LANE_Y = 34
LEFT = 26  # room for the stub of an edge whose parent is in an older window
TOP = 28  # room for the head's label
BOTTOM = 24  # room for the step numbers under the lowest row
CHAR_X = 6.5  # a fork label's width per character, at its font size
COLOURS = {
    "input": "#6b7280",
    "loop": "#2563eb",
    "update": "#9333ea",
    "fork": "#059669",
    "rollback": "#d97706",
    "bulk_update": "#db2777",
}
EDGE = "#9ca3af"
# The page's query parameters naming an older window: its namespace, and the checkpoint id
# the window ends just before.
NS_PARAM, BEFORE_PARAM = "tree_ns", "tree_before"
ID_CHARS = 64


@dataclass(frozen=True)
class Node:
    pk: int
    checkpoint_id: str
    parent_id: str | None
    source: str
    step: int | None


@dataclass(frozen=True)
class Layout:
    """Where each drawn checkpoint sits: its column (time) and lane (branch)."""

    ordered: list[Node]
    column: dict[str, int]
    lane: dict[str, int]
    branches: list[list[str]]


def asked_window(query: Mapping[str, str]) -> tuple[str, str | None]:
    """(namespace, checkpoint id) of the older window a page asks for; ("", None): the head's."""
    ns, before = query.get(NS_PARAM, ""), query.get(BEFORE_PARAM) or None
    if "\x00" in ns + (before or "") or len(before or "") > ID_CHARS:
        return "", None
    return ns, before


def anchor(ns: str) -> str:
    """The HTML id of a namespace's tree, so a paging link lands on it."""
    return "cs-tree" if not ns else "cs-tree-" + hashlib.sha1(ns.encode()).hexdigest()[:10]


def window_url(base: str, ns: str, before: str | None) -> str:
    """``base`` (the thread's page) showing ``ns``'s window that ends before ``before``."""
    # A subgraph call's tree is drawn only when asked for: its links always name it.
    query = {
        **({NS_PARAM: ns} if ns else {}),
        **({BEFORE_PARAM: before} if before else {}),
    }
    if query:
        base += ("&" if "?" in base else "?") + urlencode(query)
    return f"{base}#{anchor(ns)}"


def pager(
    base: str, *, ns: str, shown: Sequence[str], older: int, newer: Sequence[str], history: str
) -> SafeString:
    """Links from a window (``shown``, newest first) to the older, the newer and the head's.

    ``newer``: the ids of the checkpoints newer than the window, oldest first.
    """
    links = []
    if older:
        links.append(
            format_html(
                '<a class="cs-tree-older" href="{}">← {} older</a>',
                window_url(base, ns, shown[-1]),
                older,
            )
        )
    if newer:
        nearer = newer[WINDOW] if len(newer) > WINDOW else None
        links.append(
            format_html(
                '<a class="cs-tree-newer" href="{}">{} newer →</a>',
                window_url(base, ns, nearer),
                len(newer),
            )
        )
        links.append(
            format_html(
                '<a class="cs-tree-head" href="{}">the head ⇥</a>', window_url(base, ns, None)
            )
        )
    if not links:
        return mark_safe("")
    total = older + len(shown) + len(newer)
    return format_html(
        '<p class="cs-tree-pager">Checkpoints {}–{} of {}, oldest first: {} · '
        '<a href="{}">all in the history</a></p>',
        older + 1,
        older + len(shown),
        total,
        format_html_join(" · ", "{}", ((link,) for link in links)),
        history,
    )


def head_path(parents: Mapping[str, str | None], head_id: str | None) -> set[str]:
    """The head and its ancestors among ``parents`` (checkpoint id -> parent id)."""
    path: set[str] = set()
    cursor = head_id
    while cursor in parents and cursor not in path:
        path.add(cursor)
        cursor = parents[cursor]
    return path


def layout(nodes: Iterable[Node], path: set[str]) -> Layout:
    """Columns by time; lane 0 for ``path`` (the head's), then one lane per branch in the
    order the branches start. A node continues its parent's branch when it is the parent's
    first child off the head's path; any other child starts a branch."""
    ordered = sorted(nodes, key=lambda n: n.checkpoint_id)
    column = {n.checkpoint_id: i for i, n in enumerate(ordered)}
    branches: list[list[str]] = []
    on_path = [n.checkpoint_id for n in ordered if n.checkpoint_id in path]
    if on_path:
        branches.append(on_path)
    lane = dict.fromkeys(on_path, 0)
    continued: set[str] = set()
    for node in ordered:
        cid, parent = node.checkpoint_id, node.parent_id
        if cid in lane:
            continue
        if parent in lane and parent not in path and parent not in continued:
            lane[cid] = lane[parent]
            branches[lane[cid]].append(cid)
        else:
            lane[cid] = len(branches)
            branches.append([cid])
        if parent in lane:
            continued.add(parent)
    return Layout(ordered, column, lane, branches)


def draw(
    nodes: Sequence[Node],
    *,
    head_id: str | None,
    link: Callable[[int], str],
    label: str = "",
    truncated: int = 0,
    forks: Sequence[tuple[str, str, str]] = (),
    path: set[str] | None = None,
    pager: str = "",
    legend: bool = True,
) -> SafeString:
    """The tree box for one window of a namespace; ``link(pk)`` gives each node's URL.
    ``legend``: draw the key (a page draws one, in its first box).

    ``head_id`` is the namespace's head, drawn ringed when in the window; ``path`` its
    ancestry (default: within ``nodes``). ``forks``: (checkpoint id, forked thread id, its
    page) for threads forked from a checkpoint; those from drawn ones get a row each.
    ``truncated`` older checkpoints are not drawn; ``pager`` links to other windows.
    """
    if not nodes:
        return mark_safe(f"<p><em>no checkpoints</em></p>{pager}")
    if path is None:
        path = head_path({n.checkpoint_id: n.parent_id for n in nodes}, head_id)
    placed = layout(nodes, path)
    column, lane = placed.column, placed.lane
    drawn_forks = [f for f in forks if f[0] in column]
    rows = len(placed.branches) + len(drawn_forks)

    def x_of(cid: str) -> int:
        return LEFT + STEP_X * column[cid]

    def y_of(row: int) -> int:
        return TOP + LANE_Y * row

    right = x_of(placed.ordered[-1].checkpoint_id) + STEP_X
    for origin, thread_id, _ in drawn_forks:
        right = max(right, x_of(origin) + STEP_X + 12 + int(CHAR_X * (len(thread_id) + 2)))
    width, height = right + 8, y_of(rows - 1) + BOTTOM
    parts = [
        f'<svg class="cs-tree" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label or "checkpoint tree")}">'
    ]
    for node in placed.ordered:
        parts.append(_edge(node, x_of, y_of, lane))
    if head_id not in column and placed.branches and placed.branches[0][0] in path:
        # An older window: the head's path goes on to the newer ones, off to the right.
        x, y = x_of(placed.branches[0][-1]), y_of(0)
        parts.append(
            f'<path class="cs-edge cs-edge-on" d="M{x + 8},{y} L{width - 4},{y}" fill="none" '
            f'stroke="{EDGE}" stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
    for node in placed.ordered:
        row = lane[node.checkpoint_id]
        parts.append(_node(node, x_of(node.checkpoint_id), y_of(row), row, head_id, link))
    for n, fork in enumerate(drawn_forks):
        parts.append(
            _fork(fork, x_of(fork[0]), y_of(lane[fork[0]]), y_of(len(placed.branches) + n))
        )
    parts.append("</svg>")
    note = (
        f'<p class="cs-muted">Showing the newest {len(nodes)} checkpoints; {truncated} older '
        "ones are in the history.</p>"
        if truncated
        else ""
    )
    key = _key() if legend else ""
    return mark_safe(f'<div class="cs-tree-box">{key}{"".join(parts)}</div>{note}{pager}')


def _edge(node: Node, x_of, y_of, lane: Mapping[str, int]) -> str:
    cid, parent = node.checkpoint_id, node.parent_id
    x2, y2 = x_of(cid), y_of(lane[cid])
    if parent is None:
        return ""
    if parent not in lane:
        # The parent is in an older window: a dashed stub in from the left edge.
        return (
            f'<path class="cs-edge cs-edge-out" d="M4,{y2} L{x2 - 8},{y2}" fill="none" '
            f'stroke="{EDGE}" stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
    x1, y1 = x_of(parent), y_of(lane[parent])
    if y1 == y2:
        d = f"M{x1},{y1} L{x2},{y2}"
    else:
        # Down between the parent's column and the next, then along the branch's own lane.
        mid, turn = x1 + STEP_X // 2, x1 + STEP_X
        d = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {turn},{y2}"
        if x2 > turn:
            d += f" L{x2},{y2}"
    return f'<path class="cs-edge" d="{d}" fill="none" stroke="{EDGE}" stroke-width="1.5"/>'


def _node(node: Node, x: int, y: int, row: int, head_id: str | None, link) -> str:
    colour = COLOURS.get(node.source, "#374151")
    is_head = node.checkpoint_id == head_id
    step = "?" if node.step is None else str(node.step)
    tip = f"step {step} · {node.source or '?'} · {node.checkpoint_id}"
    top = y - (26 if is_head else 10)
    extra = (
        f'<circle cx="{x}" cy="{y}" r="9" fill="none" stroke="{colour}" stroke-width="2"/>'
        f'<text class="cs-head-label" x="{x}" y="{y - 14}" text-anchor="middle" '
        'font-size="10" font-weight="bold">head</text>'
        if is_head
        else ""
    )
    return (
        f'<a href="{escape(link(node.pk))}" class="cs-node{" cs-head" if is_head else ""}" '
        f'data-checkpoint="{escape(node.checkpoint_id)}" data-source="{escape(node.source)}" '
        f'data-step="{escape(step)}" data-lane="{row}">'
        f"<title>{escape(tip)}{' (head)' if is_head else ''}</title>"
        # The whole node, its step and label answer a click, not only the dot's pixels.
        f'<rect class="cs-hit" x="{x - STEP_X // 2 + 1}" y="{top}" width="{STEP_X - 2}" '
        f'height="{y + 22 - top}" fill="#fff" fill-opacity="0"/>'
        f'{extra}<circle cx="{x}" cy="{y}" r="6" fill="{colour}"/>'
        f'<text class="cs-step" x="{x}" y="{y + 18}" text-anchor="middle" font-size="9">'
        f"{escape(step)}</text></a>"
    )


def _fork(fork: tuple[str, str, str], x1: int, y1: int, y2: int) -> str:
    origin, thread_id, url = fork
    x2 = x1 + STEP_X
    colour = COLOURS["fork"]
    text = f"→ {thread_id}"
    return (
        f'<path class="cs-edge cs-fork-edge" d="M{x1},{y1} C{x1 + STEP_X // 2},{y1} '
        f'{x1 + STEP_X // 2},{y2} {x2},{y2}" fill="none" stroke="{colour}" stroke-width="1.5" '
        'stroke-dasharray="3 2"/>'
        f'<a href="{escape(url)}" class="cs-fork-link" data-thread="{escape(thread_id)}" '
        f'data-origin="{escape(origin)}"><title>forked into thread {escape(thread_id)} from '
        f"{escape(origin)}</title>"
        f'<rect class="cs-hit" x="{x2 - 7}" y="{y2 - 9}" '
        f'width="{14 + int(CHAR_X * (len(thread_id) + 2))}" height="18" fill="{colour}" '
        'fill-opacity="0"/>'
        f'<rect x="{x2 - 5}" y="{y2 - 5}" width="10" height="10" '
        f'transform="rotate(45 {x2} {y2})" fill="{colour}"/>'
        f'<text class="cs-fork-label" x="{x2 + 10}" y="{y2 + 4}" font-size="11" '
        f'fill="{colour}">{escape(text)}</text></a>'
    )


def _key() -> str:
    """The legend, kept in view at the box's top left however the tree is scrolled."""
    dots = format_html_join(
        "",
        '<span class="cs-legend"><svg width="10" height="10" aria-hidden="true"><circle '
        'cx="5" cy="5" r="5" fill="{}"/></svg> {}</span>',
        ((colour, source) for source, colour in COLOURS.items()),
    )
    return format_html(
        '<div class="cs-tree-key">{}<span class="cs-legend"><svg width="14" height="14" '
        'aria-hidden="true"><circle cx="7" cy="7" r="6" fill="none" stroke="#374151" '
        'stroke-width="2"/></svg> the head (top lane: its path)</span><span class="cs-legend">'
        '<svg width="12" height="12" aria-hidden="true"><rect x="2" y="2" width="8" '
        'height="8" transform="rotate(45 6 6)" fill="{}"/></svg> a forked thread</span>'
        '<span class="cs-legend"><svg width="18" height="6" aria-hidden="true"><path d="M0,3 '
        'L18,3" stroke="{}" stroke-width="1.5" stroke-dasharray="4 3"/></svg> to or from '
        'another window</span><span class="cs-legend">numbers: steps; one lane per branch'
        "</span></div>",
        dots,
        COLOURS["fork"],
        EDGE,
    )
