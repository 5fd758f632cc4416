"""The checkpoint tree's layout rules, and the thread page's tree through the test client:
a bounded window with the head in it, paging to every other checkpoint, one lane per
branch, step numbers, a mark per fork, a link per node."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from checkpoints.admin import tree as admin_tree
from checkpoints.admin.tree import Node
from checkpoints.models import Checkpoint, Thread
from tests.tree_threads import story_101, story_1000

SVG = {"s": "http://www.w3.org/2000/svg"}
CHECKPOINTS = "/admin/checkpoints/checkpoint/"
THREADS = "/admin/checkpoints/thread/"


def node(cid: str, parent: str | None, source: str = "loop", step: int = 0) -> Node:
    return Node(pk=ord(cid[0]) * 100 + int(cid[1:] or 0), checkpoint_id=cid, parent_id=parent,
                source=source, step=step)  # fmt: skip


def svg_of(html: str, first: bool = True):
    found = re.findall(r"<svg class=\"cs-tree\".*?</svg>", html, flags=re.S)
    return ET.fromstring(found[0]) if first else [ET.fromstring(s) for s in found]


def drawn(svg) -> dict[str, dict]:
    """checkpoint id -> its node's href, lane, x, y, step label and classes."""
    found = {}
    for a in svg.findall("s:a[@data-checkpoint]", SVG):
        dot = a.findall("s:circle", SVG)[-1]
        found[a.get("data-checkpoint")] = {
            "href": a.get("href"),
            "lane": int(a.get("data-lane")),
            "x": float(dot.get("cx")),
            "y": float(dot.get("cy")),
            "step": a.find("s:text[@class='cs-step']", SVG).text,
            "class": a.get("class"),
            "source": a.get("data-source"),
        }
    return found


def edges(svg) -> list[list[tuple[float, float]]]:
    """Each edge's points (a curve's control points dropped), in drawing order."""
    found = []
    for path in svg.findall("s:path", SVG):
        if path.get("class") != "cs-edge":
            continue  # a stub to another window, or a fork's edge
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
        points = list(zip(numbers[::2], numbers[1::2], strict=True))
        found.append([points[0], *(points[3:4] if "C" in path.get("d") else []), points[-1]])
    return found


def assert_no_edge_runs_through_a_node(svg) -> None:
    """Along a lane an edge meets only its own ends; it leaves a lane between two columns."""
    nodes = drawn(svg)
    for points in edges(svg):
        (x1, y1), *_, (x2, y2) = points
        if y1 != y2:
            assert points[1][0] == x1 + admin_tree.STEP_X, points
            assert y2 > y1, "a branch hangs below the lane it leaves"
        start = points[-2][0]
        for other in nodes.values():
            if other["y"] == y2 and start < other["x"] < x2:
                raise AssertionError(f"edge {points} runs through the node at {other}")


# -- layout rules --------------------------------------------------------------------------


def test_the_heads_path_keeps_the_top_lane_and_each_branch_has_a_lane_of_its_own():
    # a1..a6 is the head's path; b: a replay from a2 left b1-b2; c: another from a2; d: one
    # from b1; e: an update of a4 abandoned at once.
    nodes = [
        node("a1", None),
        node("a2", "a1"),
        node("b1", "a2"),
        node("b2", "b1"),
        node("c1", "a2"),
        node("d1", "b1"),
        node("c2", "c1"),
        node("a3", "a2"),
        node("a4", "a3"),
        node("e1", "a4", "update"),
        node("a5", "a4", "rollback"),
        node("a6", "a5"),
    ]
    nodes.sort(key=lambda n: n.checkpoint_id)  # ids are time-ordered; these are only names
    order = ["a1", "a2", "b1", "b2", "c1", "d1", "c2", "a3", "a4", "e1", "a5", "a6"]
    nodes = [next(n for n in nodes if n.checkpoint_id == cid) for cid in order]
    renamed = {cid: f"{i:02d}{cid}" for i, cid in enumerate(order)}
    nodes = [
        Node(n.pk, renamed[n.checkpoint_id], renamed.get(n.parent_id), n.source, n.step)
        for n in nodes
    ]
    path = admin_tree.head_path({n.checkpoint_id: n.parent_id for n in nodes}, renamed["a6"])
    placed = admin_tree.layout(nodes, path)
    lane = {cid: placed.lane[renamed[cid]] for cid in order}
    assert {lane[c] for c in ("a1", "a2", "a3", "a4", "a5", "a6")} == {0}
    assert lane["b1"] == lane["b2"] and lane["c1"] == lane["c2"]
    branch_lanes = [lane["b1"], lane["c1"], lane["d1"], lane["e1"]]
    assert sorted(branch_lanes) == [1, 2, 3, 4], "one lane per branch, in the order they start"
    assert len(placed.branches) == 5
    svg = svg_of(
        admin_tree.draw(nodes, head_id=renamed["a6"], link=lambda pk: f"/c/{pk}/", path=path)
    )
    assert_no_edge_runs_through_a_node(svg)
    # The rollback's edge stays on the head's lane, over the abandoned checkpoints' columns.
    (rollback,) = [p for p in edges(svg) if p[-1][0] == drawn(svg)[renamed["a5"]]["x"]]
    assert {y for _, y in rollback} == {drawn(svg)[renamed["a5"]]["y"]}


def test_each_node_links_to_its_checkpoint_and_shows_its_step():
    nodes = [node("a1", None, "input", -1), node("a2", "a1", "loop", 0), node("a3", "a2", "loop")]
    nodes[2] = Node(nodes[2].pk, "a3", "a2", "update", None)
    svg = svg_of(admin_tree.draw(nodes, head_id="a3", link=lambda pk: f"/c/{pk}/"))
    found = drawn(svg)
    assert {cid: (n["href"], n["step"]) for cid, n in found.items()} == {
        "a1": (f"/c/{nodes[0].pk}/", "-1"),
        "a2": (f"/c/{nodes[1].pk}/", "0"),
        "a3": (f"/c/{nodes[2].pk}/", "?"),
    }
    assert [cid for cid, n in found.items() if "cs-head" in n["class"]] == ["a3"]
    head = svg.find("s:a[@data-checkpoint='a3']", SVG)
    assert head.find("s:text[@class='cs-head-label']", SVG).text == "head"


def test_two_forks_from_one_checkpoint_are_two_marks_each_on_its_own_row():
    nodes = [node("a1", None), node("a2", "a1"), node("a3", "a2")]
    forks = [("a2", "fork-one", "/t/1/"), ("a2", "fork-two", "/t/2/"), ("zz", "elsewhere", "/")]
    svg = svg_of(admin_tree.draw(nodes, head_id="a3", link=str, forks=forks))
    marks = svg.findall("s:a[@class='cs-fork-link']", SVG)
    assert [(a.get("data-thread"), a.get("data-origin"), a.get("href")) for a in marks] == [
        ("fork-one", "a2", "/t/1/"),
        ("fork-two", "a2", "/t/2/"),
    ]
    diamonds = [a.findall("s:rect", SVG)[-1] for a in marks]
    places = {(float(d.get("x")), float(d.get("y"))) for d in diamonds}
    assert len(places) == 2, "two forks from one checkpoint draw two diamonds"
    lowest = max(n["y"] for n in drawn(svg).values())
    assert all(y > lowest for _, y in places), "the forks' rows are below every lane"
    labels = [a.find("s:text", SVG).text for a in marks]
    assert labels == ["→ fork-one", "→ fork-two"]
    assert int(svg.get("height")) >= max(y for _, y in places) + 10


def test_a_parent_in_an_older_window_gets_a_stub_and_the_legend_is_inside_the_box():
    nodes = [node("a5", "a4"), node("a6", "a5"), node("b1", "a3")]
    html = admin_tree.draw(nodes, head_id="a6", link=str)
    svg = svg_of(html)
    stubs = svg.findall("s:path[@class='cs-edge cs-edge-out']", SVG)
    assert len(stubs) == 2  # a5's parent and b1's parent are not drawn
    assert {drawn(svg)[c]["lane"] for c in ("a5", "a6")} == {0} and drawn(svg)["b1"]["lane"] == 1
    box = html[html.index('<div class="cs-tree-box">') :]
    assert box.index('<div class="cs-tree-key">') < box.index('<svg class="cs-tree"')
    assert "a forked thread" in box and "numbers: steps" in box


def test_the_asked_window_ignores_what_cannot_be_a_checkpoint_id():
    assert admin_tree.asked_window({}) == ("", None)
    assert admin_tree.asked_window({"tree_before": "1f0-abc"}) == ("", "1f0-abc")
    assert admin_tree.asked_window({"tree_ns": "sub:1", "tree_before": "x"}) == ("sub:1", "x")
    assert admin_tree.asked_window({"tree_before": "x\x00"}) == ("", None)
    assert admin_tree.asked_window({"tree_before": "x" * 65}) == ("", None)


# -- the thread page -----------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


def thread_page(client, thread_id: str, **params) -> str:
    pk = Thread.objects.get(thread_id=thread_id).pk
    response = client.get(f"{THREADS}{pk}/change/", params)
    assert response.status_code == 200
    return response.content.decode()


def pager_links(html: str) -> dict[str, str]:
    found = re.findall(r'<a class="cs-tree-(older|newer|head)" href="([^"]+)"', html)
    return {kind: unescape(href) for kind, href in found}


def follow(client, href: str) -> str:
    response = client.get(href.split("#")[0])
    assert response.status_code == 200
    return response.content.decode()


@pytestmark_db
def test_a_101_checkpoint_thread_draws_its_newest_window_with_every_move_in_it(admin_client, saver):
    moves = story_101(saver)
    stored = {c.checkpoint_id: c for c in Checkpoint.objects.filter(thread__thread_id="tree-101")}
    assert len(stored) == 101
    html = thread_page(admin_client, "tree-101")
    svg = svg_of(html)
    found = drawn(svg)
    newest = sorted(stored)[-admin_tree.WINDOW :]
    assert sorted(found) == newest, "the window is the newest WINDOW checkpoints"
    head = max(stored)
    assert [c for c, n in found.items() if "cs-head" in n["class"]] == [head]
    assert found[head]["lane"] == 0
    for cid, n in found.items():
        assert n["href"] == f"{CHECKPOINTS}{stored[cid].pk}/change/"
        assert n["step"] == str(stored[cid].step)
        assert n["source"] == stored[cid].source
    # The head's path is lane 0; every other drawn checkpoint is on a branch's lane.
    parents = {cid: c.parent_checkpoint_id for cid, c in stored.items()}
    path = admin_tree.head_path(parents, head)
    assert {c for c, n in found.items() if n["lane"] == 0} == path & set(found)
    # Both replays from one checkpoint, the update and the rollback are drawn.
    replays = [c for c, n in found.items() if n["source"] == "fork"]
    assert len(replays) == 2 and {parents[c] for c in replays} == {moves["replayed"]}
    assert any(parents[c] == moves["updated"] and n["source"] == "update" for c, n in found.items())
    (rollback,) = [c for c, n in found.items() if n["source"] == "rollback"]
    assert parents[rollback] == moves["target"] and found[rollback]["lane"] == 0
    # Each branch is one lane: the abandoned paths of the two replays, the update's old
    # path, the rollback's old path; the replays' own paths hang from the replayed node.
    lanes = {}
    for cid, n in found.items():
        lanes.setdefault(n["lane"], set()).add(cid)
    for lane, members in lanes.items():
        if lane:
            # A lane is one chain: all but its first checkpoint have their parent in it.
            firsts = [c for c in members if parents[c] not in members]
            assert len(firsts) == 1, (lane, firsts)
    assert len(lanes) >= 5
    assert_no_edge_runs_through_a_node(svg)
    marks = svg.findall("s:a[@class='cs-fork-link']", SVG)
    assert sorted(a.get("data-thread") for a in marks) == ["tree-101-fork-a", "tree-101-fork-b"]
    assert {a.get("data-origin") for a in marks} == {moves["forked"]}
    assert len({a.findall("s:rect", SVG)[-1].get("y") for a in marks}) == 2
    older = len(stored) - admin_tree.WINDOW
    assert f"Showing the newest {admin_tree.WINDOW} checkpoints; {older} older" in html
    assert f"Checkpoints {older + 1}–101 of 101" in html
    assert set(pager_links(html)) == {"older"}


@pytestmark_db
def test_paging_from_the_head_reaches_every_checkpoint_of_1000_with_50_branches(
    admin_client, saver
):
    story_1000(saver)
    stored = {c.checkpoint_id: c for c in Checkpoint.objects.filter(thread__thread_id="tree-1000")}
    assert len(stored) == 1000
    parents = {cid: c.parent_checkpoint_id for cid, c in stored.items()}
    head = max(stored)
    path = admin_tree.head_path(parents, head)
    # 50 branches: the answer and review each replay left behind.
    starts = [c for c in stored if c not in path and parents[c] in path]
    assert len(starts) == 50
    html = thread_page(admin_client, "tree-1000")
    seen: dict[str, dict] = {}
    windows = 0
    while True:
        windows += 1
        svg = svg_of(html)
        found = drawn(svg)
        assert 0 < len(found) <= admin_tree.WINDOW
        # The picture's size is bounded by the window, not by the thread.
        assert int(svg.get("width")) <= admin_tree.LEFT + admin_tree.STEP_X * (
            admin_tree.WINDOW + 1
        )
        assert not set(found) & set(seen), "windows do not overlap"
        assert {c for c, n in found.items() if n["lane"] == 0} == path & set(found)
        assert_no_edge_runs_through_a_node(svg)
        for cid, n in found.items():
            assert n["href"] == f"{CHECKPOINTS}{stored[cid].pk}/change/"
            assert n["step"] == str(stored[cid].step)
        if windows == 1:
            assert head in found and "cs-head" in found[head]["class"]
            assert found[head]["lane"] == 0 and found[head]["y"] == min(
                n["y"] for n in found.values()
            )
        seen.update(found)
        links = pager_links(html)
        if windows > 1:
            assert {"newer", "head"} <= set(links) and head not in found
            on = svg.findall("s:path[@class='cs-edge cs-edge-on']", SVG)
            assert len(on) == (1 if path & set(found) else 0), "the head's path goes on"
            assert follow(admin_client, links["head"]).count('class="cs-node cs-head"') == 1
        if "older" not in links:
            break
        previous = set(found)
        html = follow(admin_client, links["older"])
        newer = drawn(svg_of(follow(admin_client, pager_links(html)["newer"])))
        assert set(newer) == previous, "newer goes back to the window it came from"
    assert set(seen) == set(stored), "every checkpoint is a link in some window"
    assert windows == -(-1000 // admin_tree.WINDOW)
    assert sum(1 for c in starts if seen[c]["lane"] > 0) == 50


@pytestmark_db
def test_a_bad_window_shows_the_heads(admin_client, saver):
    story_101(saver, "tree-bad")
    for before in ("not-an-id", "x" * 200, "zzzz"):
        html = thread_page(admin_client, "tree-bad", tree_before=before)
        assert svg_of(html) is not None
    html = thread_page(admin_client, "tree-bad", tree_before="0")
    assert "no checkpoints" in html and pager_links(html).get("head")
