"""The checkpoint tree in Chromium: a 101-checkpoint thread with replays, an update, a
rollback and forks, and one of 1,000 checkpoints with 50 branches, written by the chat graph
through the saver and the time-travel service. The head is in view on load, the box scrolls,
every node is a link, and the page keeps to the CSP."""

from __future__ import annotations

import re

import pytest

from checkpoints.admin import tree as admin_tree
from checkpoints.models import Checkpoint, Thread
from tests.browser_fixtures import csp_violations, watch_csp
from tests.tree_threads import story_101, story_1000

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
THREADS = "/admin/checkpoints/thread/"
NODE = re.compile(r"^/admin/checkpoints/checkpoint/(\d+)/change/$")
# The box's visible area (inside its border, without its scrollbars), in page pixels.
VISIBLE = """b => { const r = b.getBoundingClientRect();
  return {left: r.left + b.clientLeft, top: r.top + b.clientTop,
          right: r.left + b.clientLeft + b.clientWidth,
          bottom: r.top + b.clientTop + b.clientHeight,
          scrollLeft: b.scrollLeft, scrollWidth: b.scrollWidth, clientWidth: b.clientWidth}; }"""


def open_tree(page, thread_id: str) -> None:
    watch_csp(page)
    page.goto(f"{page.base}{THREADS}{Thread.objects.get(thread_id=thread_id).pk}/change/")
    page.wait_for_selector("svg.cs-tree a.cs-node")
    page.wait_for_load_state("load")


def inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["left"]
        and inner["y"] >= outer["top"]
        and inner["x"] + inner["width"] <= outer["right"]
        and inner["y"] + inner["height"] <= outer["bottom"]
    )


def box_area(page) -> dict:
    return page.locator(".cs-tree-box").first.evaluate(VISIBLE)


def assert_head_in_view(page) -> None:
    """The head's node lies inside the box's visible area, and the box inside the window."""
    area = box_area(page)
    head = page.locator("svg.cs-tree a.cs-head circle[r='6']").first.bounding_box()
    assert inside(head, area), (head, area)
    viewport = page.viewport_size
    window = {"left": 0, "top": 0, "right": viewport["width"], "bottom": viewport["height"]}
    page.locator(".cs-tree-box").first.scroll_into_view_if_needed()
    head = page.locator("svg.cs-tree a.cs-head circle[r='6']").first.bounding_box()
    assert inside(head, window), (head, viewport)


def assert_every_node_links_to_its_checkpoint(page, thread_id: str) -> int:
    stored = dict(
        Checkpoint.objects.filter(thread__thread_id=thread_id).values_list("checkpoint_id", "pk")
    )
    nodes = page.locator("svg.cs-tree a.cs-node")
    found = nodes.evaluate_all(
        "as => as.map(a => [a.dataset.checkpoint, a.getAttribute('href'), a.href.baseVal])"
    )
    assert 0 < len(found) <= admin_tree.WINDOW
    for checkpoint_id, href, resolved in found:
        assert href == resolved == f"/admin/checkpoints/checkpoint/{stored[checkpoint_id]}/change/"
    return len(found)


def assert_the_box_scrolls_to_the_oldest_and_keeps_its_legend(page) -> None:
    area = box_area(page)
    assert area["scrollWidth"] > area["clientWidth"], "the window is wider than the page"
    assert area["scrollLeft"] > 0, "the tree opened scrolled to its newest end"
    box = page.locator(".cs-tree-box").first
    box.hover()
    page.mouse.wheel(-20_000, 0)
    page.wait_for_function(
        "() => document.querySelector('.cs-tree-box').scrollLeft === 0", polling="raf"
    )
    oldest = page.locator("svg.cs-tree a.cs-node circle[r='6']").first.bounding_box()
    assert inside(oldest, box_area(page))
    head = page.locator("svg.cs-tree a.cs-head circle[r='6']")
    if head.count():
        assert not inside(head.bounding_box(), box_area(page))
    assert inside(page.locator(".cs-tree-key").first.bounding_box(), box_area(page))


def test_a_101_checkpoint_thread_shows_its_head_branches_and_forks(page, saver, shot):
    moves = story_101(saver)
    open_tree(page, "tree-101")
    assert_head_in_view(page)
    head = page.locator("svg.cs-tree a.cs-head")
    assert head.get_attribute("data-checkpoint") == max(
        Checkpoint.objects.filter(thread__thread_id="tree-101").values_list(
            "checkpoint_id", flat=True
        )
    )
    assert head.get_attribute("data-lane") == "0"
    # The rollback, both replays and the update: drawn and inside the box's visible area at
    # load, or reachable by scrolling it.
    tree = page.locator("svg.cs-tree").first
    assert tree.locator("a.cs-node[data-source='rollback']").count() == 1
    assert tree.locator("a.cs-node[data-source='fork']").count() == 2
    assert tree.locator("a.cs-node[data-source='update']").count() >= 1
    marks = tree.locator("a.cs-fork-link")
    assert marks.count() == 2
    boxes = [marks.nth(i).locator("rect").last.bounding_box() for i in range(2)]
    assert boxes[0]["y"] + boxes[0]["height"] <= boxes[1]["y"], "two forks, two marks"
    assert {marks.nth(i).get_attribute("data-origin") for i in range(2)} == {moves["forked"]}
    steps = tree.locator("a.cs-node text.cs-step").all_text_contents()
    assert len(steps) == admin_tree.WINDOW and all(re.fullmatch(r"-?\d+", s) for s in steps)
    assert assert_every_node_links_to_its_checkpoint(page, "tree-101") == admin_tree.WINDOW
    assert "41 older" in page.locator(".cs-tree-pager").inner_text()
    shot(page, "tree-101")
    assert_the_box_scrolls_to_the_oldest_and_keeps_its_legend(page)
    shot(page, "tree-101-scrolled")
    # A node opens its checkpoint's page.
    rollback = tree.locator("a.cs-node[data-source='rollback']")
    rollback_id = rollback.get_attribute("data-checkpoint")
    rollback.scroll_into_view_if_needed()
    rollback.locator("circle[r='6']").click()
    page.wait_for_url(re.compile(r"/admin/checkpoints/checkpoint/\d+/change/"))
    assert NODE.match(page.url.removeprefix(page.base))
    assert page.locator(".field-checkpoint_id .readonly").inner_text() == rollback_id
    assert csp_violations(page) == []
    # A phone's width: the admin stacks the label over the field; the box still fits the
    # page and opens at the head.
    page.set_viewport_size({"width": 420, "height": 800})
    open_tree(page, "tree-101")
    assert_head_in_view(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 420 + 1
    shot(page, "tree-101-narrow")


def test_1000_checkpoints_with_50_branches_open_at_the_head_and_page_back(page, saver, shot):
    story_1000(saver)
    open_tree(page, "tree-1000")
    assert_head_in_view(page)
    assert assert_every_node_links_to_its_checkpoint(page, "tree-1000") == admin_tree.WINDOW
    lanes = page.locator("svg.cs-tree a.cs-node").evaluate_all(
        "as => new Set(as.map(a => a.dataset.lane)).size"
    )
    assert lanes >= 2
    width = int(page.locator("svg.cs-tree").first.get_attribute("width"))
    assert width <= admin_tree.LEFT + admin_tree.STEP_X * (admin_tree.WINDOW + 1)
    shot(page, "tree-1000")
    assert_the_box_scrolls_to_the_oldest_and_keeps_its_legend(page)
    # An older window: no head in it, opened at its newest end, its nodes links too.
    page.locator("a.cs-tree-older").first.click()
    page.wait_for_url(re.compile(r"tree_before="))
    page.wait_for_selector("svg.cs-tree a.cs-node")
    page.wait_for_load_state("load")
    assert page.locator("svg.cs-tree a.cs-head").count() == 0
    area = box_area(page)
    assert area["scrollLeft"] == area["scrollWidth"] - area["clientWidth"]
    assert (
        page.locator(".cs-tree-box").first.evaluate("b => b.getBoundingClientRect().top")
        < (page.viewport_size["height"])
    ), "the paging link lands on the tree"
    assert assert_every_node_links_to_its_checkpoint(page, "tree-1000") == admin_tree.WINDOW
    shot(page, "tree-1000-older")
    page.locator("a.cs-tree-head").first.click()
    page.wait_for_selector("svg.cs-tree a.cs-head")
    page.wait_for_load_state("load")
    assert_head_in_view(page)
    assert csp_violations(page) == []
