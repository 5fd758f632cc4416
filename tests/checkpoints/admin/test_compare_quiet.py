"""A quieter compare (issue 54 item 5): LangGraph's internal channels folded away and not
counted, an append-only list as one "+N items" block, and "compare with parent" and "with
head" on every checkpoint page."""

from __future__ import annotations

import re

import pytest

from checkpoints.admin.display import is_internal
from checkpoints.models import Checkpoint
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)
COMPARE = "/admin/checkpoints/checkpoint/compare/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


def rows_of(thread_id: str) -> list[Checkpoint]:
    return list(Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("checkpoint_id"))


def test_internals_are_folded_and_not_counted_and_lists_are_one_block(admin_client, saver):
    run_chat(saver, "long", turns=6)
    rows = rows_of("long")
    head = rows[-1]
    pages = [
        admin_client.get(COMPARE, {"a": row.pk, "b": head.pk}).content.decode() for row in rows[:-1]
    ]
    folded = [p for p in pages if 'id="compare-internals"' in p]
    assert folded, "a LangGraph run stores branch:to:* channels on some checkpoint"
    for page in folded:
        fold = page.index('id="compare-internals"')
        outside, inside = page[:fold], page[fold:]
        shown = re.findall(r'class="cs-card cs-change" data-channel="([^"]+)"', outside)
        hidden = re.findall(r'class="cs-card cs-change" data-channel="([^"]+)"', inside)
        assert hidden and all(is_internal(c) for c in hidden), hidden
        assert not any(is_internal(c) for c in shown), shown
        counted = int(re.search(r"<strong>(\d+)</strong> channel\(s\) differ", page).group(1))
        assert counted == outside.count('class="cs-card cs-change"')
    listed = [
        p
        for p in pages
        if 'data-channel="messages">\n  <h2>messages <span class="cs-kind">list' in p
    ]
    assert listed
    messages = listed[0][listed[0].index('data-channel="messages"') :]
    messages = messages[: messages.index("</details>")]
    # The messages added since as one block and one transcript, not a line per message.
    added = int(re.search(r"\+(\d+) items added</summary>", messages).group(1))
    assert added >= 8 and messages.count("<details") == 1
    assert messages.count('<th class="cs-role">') == added


def test_every_checkpoint_page_compares_with_its_parent_and_the_head(admin_client, saver):
    run_chat(saver, "short", turns=2)
    rows = rows_of("short")
    middle, head = rows[len(rows) // 2], rows[-1]
    parent = next(r for r in rows if r.checkpoint_id == middle.parent_checkpoint_id)
    page = admin_client.get(f"{CHECKPOINTS}{middle.pk}/change/").content.decode()
    with_parent = re.search(r'class="cs-compare-parent" href="([^"]+)"', page).group(1)
    with_head = re.search(r'class="cs-compare-head" href="([^"]+)"', page).group(1)
    assert with_parent.replace("&amp;", "&") == f"{COMPARE}?a={parent.pk}&b={middle.pk}"
    assert with_head.replace("&amp;", "&") == f"{COMPARE}?a={middle.pk}&b={head.pk}"
    for url in (with_parent, with_head):
        assert admin_client.get(url.replace("&amp;", "&")).status_code == 200
    # The head has no "with head", the first checkpoint no parent.
    at_head = admin_client.get(f"{CHECKPOINTS}{head.pk}/change/").content.decode()
    assert "cs-compare-head" not in at_head and "cs-compare-parent" in at_head
    first = admin_client.get(f"{CHECKPOINTS}{rows[0].pk}/change/").content.decode()
    assert "cs-compare-parent" not in first and "cs-compare-head" in first
