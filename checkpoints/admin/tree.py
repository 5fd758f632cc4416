"""A thread's checkpoints drawn as a tree, in inline SVG made on the server.

Time runs left to right (checkpoint ids are time-ordered); each branch (a rollback, a
replay from an old checkpoint, an update that forked the path) gets a lane of its own,
the head's path keeps the top lane. Every node links to its checkpoint's page; a thread
forked from another starts with a link to its origin. Only the newest ``WINDOW``
checkpoints of each namespace are drawn, so a long thread stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WINDOW = 200
STEP_X = 22
LANE_Y = 26
PAD = 16
COLOURS = {
    "input": "#6b7280",
    "loop": "#2563eb",
    "update": "#9333ea",
    "fork": "#059669",
    "rollback": "#d97706",
    "bulk_update": "#db2777",
}


@dataclass(frozen=True)
class Node:
    pk: int
    checkpoint_id: str
    parent_id: str | None
    source: str
    step: int | None


def lanes(nodes: Sequence[Node], head_id: str | None) -> dict[str, int]:
    """Lane per checkpoint id: the head's ancestry on lane 0, other branches below."""
    by_id = {n.checkpoint_id: n for n in nodes}
    lane: dict[str, int] = {}
    spine = set()
    cursor = head_id
    while cursor in by_id and cursor not in spine:
        spine.add(cursor)
        cursor = by_id[cursor].parent_id
    taken: dict[str, bool] = {}
    next_lane = 1
    for node in sorted(nodes, key=lambda n: n.checkpoint_id):
        if node.checkpoint_id in spine:
            lane[node.checkpoint_id] = 0
            continue
        parent = node.parent_id
        if parent in lane and not taken.get(parent) and lane[parent] != 0:
            lane[node.checkpoint_id] = lane[parent]
            taken[parent] = True
        else:
            lane[node.checkpoint_id] = next_lane
            next_lane += 1
        if parent in lane and lane[parent] == lane[node.checkpoint_id]:
            taken[parent] = True
    return lane


def draw(
    nodes: Sequence[Node],
    *,
    head_id: str | None,
    link: Callable[[int], str],
    label: str = "",
    truncated: int = 0,
    forks: Sequence[tuple[str, str, str]] = (),
) -> SafeString:
    """The SVG for one namespace's checkpoints; ``link(pk)`` gives each node's URL.

    ``forks``: (checkpoint id, forked thread id, its page) for threads forked from a drawn
    checkpoint; each gets a branch below its origin that links to the forked thread.
    """
    if not nodes:
        return mark_safe("<p><em>no checkpoints</em></p>")
    ordered = sorted(nodes, key=lambda n: n.checkpoint_id)
    column = {n.checkpoint_id: i for i, n in enumerate(ordered)}
    lane = lanes(ordered, head_id)
    drawn_forks = [f for f in forks if f[0] in column]
    width = PAD * 2 + STEP_X * (len(ordered) - 1) + 40
    fork_lane = max(lane.values()) + 1
    height = PAD * 2 + LANE_Y * (fork_lane if drawn_forks else fork_lane - 1) + 8

    def at(checkpoint_id: str) -> tuple[int, int]:
        return PAD + STEP_X * column[checkpoint_id], PAD + LANE_Y * lane[checkpoint_id]

    parts = [
        f'<svg class="cs-tree" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label or "checkpoint tree")}">'
    ]
    for node in ordered:
        if node.parent_id in column:
            (x1, y1), (x2, y2) = at(node.parent_id), at(node.checkpoint_id)
            parts.append(
                f'<path class="cs-edge" d="M{x1},{y1} C{x1 + 10},{y1} {x2 - 10},{y2} {x2},{y2}" '
                'fill="none" stroke="#9ca3af" stroke-width="1.5"/>'
            )
    for node in ordered:
        x, y = at(node.checkpoint_id)
        colour = COLOURS.get(node.source, "#374151")
        is_head = node.checkpoint_id == head_id
        tip = f"step {node.step} · {node.source or '?'} · {node.checkpoint_id}"
        ring = (
            f'<circle cx="{x}" cy="{y}" r="9" fill="none" stroke="{colour}" stroke-width="2"/>'
            if is_head
            else ""
        )
        parts.append(
            f'<a href="{escape(link(node.pk))}" class="cs-node{" cs-head" if is_head else ""}" '
            f'data-checkpoint="{escape(node.checkpoint_id)}" data-source="{escape(node.source)}">'
            f"<title>{escape(tip)}{' (head)' if is_head else ''}</title>{ring}"
            f'<circle cx="{x}" cy="{y}" r="6" fill="{colour}"/></a>'
        )
    for n, (origin, thread_id, url) in enumerate(drawn_forks):
        (x1, y1), y2 = at(origin), PAD + LANE_Y * fork_lane
        x2 = x1 + 12 + 6 * n
        parts.append(
            f'<path class="cs-edge cs-fork-edge" d="M{x1},{y1} C{x1},{y2} {x2},{y2} {x2},{y2}" '
            f'fill="none" stroke="{COLOURS["fork"]}" stroke-width="1.5" stroke-dasharray="3 2"/>'
            f'<a href="{escape(url)}" class="cs-fork-link" data-thread="{escape(thread_id)}" '
            f'data-origin="{escape(origin)}"><title>forked into thread {escape(thread_id)}'
            f'</title><rect x="{x2 - 5}" y="{y2 - 5}" width="10" height="10" '
            f'transform="rotate(45 {x2} {y2})" fill="{COLOURS["fork"]}"/></a>'
        )
    parts.append("</svg>")
    note = (
        f'<p class="cs-muted">Showing the newest {len(ordered)} checkpoints; {truncated} older '
        "ones are in the history.</p>"
        if truncated
        else ""
    )
    legend = " ".join(
        f'<span class="cs-legend"><svg width="10" height="10"><circle cx="5" cy="5" r="5" '
        f'fill="{c}"/></svg> {escape(s)}</span>'
        for s, c in COLOURS.items()
    )
    return mark_safe(
        f'<div class="cs-tree-box">{"".join(parts)}</div>{note}<p class="cs-muted">{legend} · '
        "ringed: the head; a diamond below a checkpoint: a thread forked from it</p>"
    )
