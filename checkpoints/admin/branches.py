"""A thread's branches, as Studio's "1 of 2": where a checkpoint has several children (an
update or rollback from an earlier checkpoint forks the history there), which branch the
page shows and links to the others.

A branch is named by its head: the newest checkpoint among one child's descendants.
Branches are counted in the order their first checkpoint was written (ids are time-ordered).
The page shows the branch of the checkpoint it is asked for (``BRANCH_PARAM``), else the
thread's head; its links switch in place, on the thread page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from checkpoints.admin.queries import branch_root_rows, thread_has_branches

BRANCH_PARAM = "branch_at"
ID_CHARS = 64


@dataclass(frozen=True)
class Fork:
    """One checkpoint with several children: which of its branches is shown (from 1)."""

    at: str  # the checkpoint the branches start from
    step: int | None
    shown: int
    heads: tuple[str, ...]  # each branch's head, in the order the branches started


def forks_on_path(
    parents: Mapping[str, str | None], steps: Mapping[str, int | None], shown_leaf: str
) -> list[Fork]:
    """The forks on ``shown_leaf``'s ancestry, oldest first, each naming its branch heads."""
    children: dict[str, list[str]] = {}
    for cid in sorted(parents):
        parent = parents[cid]
        if parent in parents:
            children.setdefault(parent, []).append(cid)
    # The newest descendant of each checkpoint: children are newer than their parent, so
    # one pass from the newest id down settles every one.
    newest: dict[str, str] = {}
    for cid in sorted(parents, reverse=True):
        newest[cid] = max([cid, *(newest[c] for c in children.get(cid, ()))])
    path: list[str] = []
    on_path: set[str] = set()
    cursor: str | None = shown_leaf
    while cursor in parents and cursor not in on_path:
        path.append(cursor)
        on_path.add(cursor)
        cursor = parents[cursor]
    forks = []
    for cid in reversed(path):
        kids = children.get(cid, [])
        if len(kids) < 2:
            continue
        shown = next(i for i, kid in enumerate(kids) if kid in on_path)
        forks.append(Fork(cid, steps.get(cid), shown + 1, tuple(newest[k] for k in kids)))
    return forks


def asked_leaf(query: Mapping[str, str]) -> str | None:
    """The checkpoint whose branch the page is asked to show (None: the head's)."""
    asked = query.get(BRANCH_PARAM) or None
    if asked is None or "\x00" in asked or len(asked) > ID_CHARS:
        return None
    return asked


def switcher(
    *, alias: str, thread_pk: int, base: str, query: Mapping[str, str], link
) -> SafeString:
    """The thread page's branch switcher: per fork on the shown branch, "branch k of n" with
    links to the previous and next branches (on this page) and to the shown branch's head
    checkpoint; empty when the thread never branched. ``link(pk)``: a checkpoint's page."""
    if not thread_has_branches(alias=alias, thread_pk=thread_pk):
        return mark_safe("")
    rows = branch_root_rows(alias=alias, thread_pk=thread_pk)
    parents = {cid: parent for _pk, cid, parent, _step in rows}
    steps = {cid: step for _pk, cid, _parent, step in rows}
    pks = {cid: pk for pk, cid, _parent, _step in rows}
    head = rows[-1][1]
    leaf = asked_leaf(query)
    if leaf not in parents:
        leaf = head
    forks = forks_on_path(parents, steps, leaf)
    if not forks:
        return mark_safe("")

    def switch(to: str) -> str:
        return f"{base}{'&' if '?' in base else '?'}{urlencode({BRANCH_PARAM: to})}#cs-branches"

    lines = []
    for fork in forks:
        n = len(fork.heads)
        prev_head = fork.heads[(fork.shown - 2) % n]
        next_head = fork.heads[fork.shown % n]
        shown_head = fork.heads[fork.shown - 1]
        lines.append(
            (
                fork.at,
                fork.at,
                "?" if fork.step is None else fork.step,
                switch(prev_head),
                fork.shown,
                n,
                switch(next_head),
                link(pks[shown_head]),
                shown_head,
                " (the thread's head)" if shown_head == head else "",
            )
        )
    rows_html = format_html_join(
        "",
        '<li class="cs-branch" data-at="{}">at checkpoint <code>{}</code> (step {}): '
        '<a class="cs-branch-prev" href="{}">‹ previous</a> '
        '<strong class="cs-branch-count">branch {} of {}</strong> '
        '<a class="cs-branch-next" href="{}">next ›</a> · its head '
        '<a class="cs-branch-head" href="{}">{}</a>{}</li>',
        lines,
    )
    back = format_html(' · <a href="{}">back to the head</a>', base)
    return format_html(
        '<div class="cs-card cs-branches" id="cs-branches"><h2>Branches</h2>'
        '<p class="cs-muted">This thread forks where an update or a rollback started from an '
        "earlier checkpoint. Showing the branch of <code>{}</code>{}.</p><ul>{}</ul></div>",
        leaf,
        " (the head)" if leaf == head else back,
        rows_html,
    )
