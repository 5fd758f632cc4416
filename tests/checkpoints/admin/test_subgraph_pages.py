"""Subgraph-aware thread and history pages (issue 54 item 1), on a thread written by a real
LangGraph agent whose node ``act`` invokes a compiled subgraph 175 times: the calls are
folded under their node ("175 calls of act"), named ``act #N`` in the order they began,
listed a page at a time under the root step that ran them, with one legend on the page; the
history's namespace filter offers the node with its call count."""

from __future__ import annotations

import re

import pytest

from checkpoints.admin.subgraphs import CALLS_PAGE
from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_subgraph_calls

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
HISTORY = "/admin/checkpoints/checkpoint/"
# The page's budget at any number of calls (issue 54).
MAX_BYTES = 250_000


def first_checkpoints(thread_id: str) -> list[Checkpoint]:
    """Each call's first checkpoint, in the order the calls began."""
    rows = Checkpoint.objects.filter(thread__thread_id=thread_id).exclude(checkpoint_ns="")
    firsts: dict[str, Checkpoint] = {}
    for row in rows.order_by("checkpoint_id"):
        firsts.setdefault(row.checkpoint_ns, row)
    return list(firsts.values())


def test_the_calls_fold_under_their_node_in_call_order_under_the_step_that_ran_them(
    admin_client, saver
):
    run_subgraph_calls(saver, "agent", 175)
    thread = Thread.objects.get(thread_id="agent")
    firsts = first_checkpoints("agent")
    assert len(firsts) == 175
    page = admin_client.get(f"{THREADS}{thread.pk}/change/").content.decode()
    assert len(page.encode()) <= MAX_BYTES, len(page.encode())
    assert "175 calls of act" in page
    # One legend for the page, and one tree (the root's): no box per call.
    assert page.count('class="cs-tree-key"') == 1
    assert page.count('<svg class="cs-tree"') == 1
    # The first page of calls, named by node and number in the order they began.
    named = re.findall(
        r'data-ns="([^"]+)">(?:<td class="cs-call-step"[^>]*>.*?</td>)?'
        r'<td class="cs-call-name">act #(\d+)<',
        page,
    )
    assert [int(n) for _, n in named] == list(range(1, CALLS_PAGE + 1))
    assert [ns for ns, _ in named] == [f.checkpoint_ns for f in firsts[:CALLS_PAGE]]
    # Each call sits under the root step whose checkpoint LangGraph names as its parent.
    body = page[page.index('class="cs-calls"') :]
    for first in firsts[:CALLS_PAGE]:
        parent_id = first.metadata["parents"][""]
        row = body.index(f'data-ns="{first.checkpoint_ns}"')
        header = body.rindex('class="cs-call-step"', 0, body.index("</tr>", row))
        assert f"checkpoint {parent_id}" in body[header : header + 400], first.checkpoint_ns
    # Later calls are a link away, not on the page.
    assert "act #51<" not in page and "later calls →" in page
    later = admin_client.get(
        f"{THREADS}{thread.pk}/change/", {"calls": "act", "calls_page": 4}
    ).content.decode()
    numbers = [int(n) for n in re.findall(r'class="cs-call-name">act #(\d+)<', later)]
    assert numbers == list(range(151, 176))
    assert 'data-node="act" open' in later and "← earlier calls" in later


def test_a_call_s_tree_and_history_are_a_link_away(admin_client, saver):
    run_subgraph_calls(saver, "agent", 30)
    thread = Thread.objects.get(thread_id="agent")
    call = first_checkpoints("agent")[29]  # act #30
    ns = call.checkpoint_ns
    page = admin_client.get(f"{THREADS}{thread.pk}/change/", {"tree_ns": ns}).content.decode()
    assert f"act #30: namespace {ns}" in page
    assert page.count('<svg class="cs-tree"') == 2 and page.count('class="cs-tree-key"') == 1
    history = admin_client.get(
        HISTORY, {"thread__id__exact": thread.pk, "namespace": ns}
    ).content.decode()
    shown = set(re.findall(r'title="(act:[^"]+)"', history))
    assert shown == {ns}
    # Each row names its call as the thread page does: steps restart in every call.
    assert re.findall(r'<span class="cs-ns" title="act:[^"]+">([^<]+)<', history)[0] == "act #30"


def test_the_history_filter_offers_the_node_with_its_call_count(admin_client, saver):
    run_subgraph_calls(saver, "agent", 60)
    thread = Thread.objects.get(thread_id="agent")
    history = admin_client.get(HISTORY, {"thread__id__exact": thread.pk}).content.decode()
    assert "act: 60 calls" in history
    # One choice for the node, none per call.
    assert history.count("namespace=act%3A") == 1, history.count("namespace=act%3A")
    every = admin_client.get(
        HISTORY, {"thread__id__exact": thread.pk, "namespace": "act:*"}
    ).content.decode()
    assert 'title="act:' in every and "cs-ns-root" not in every


def test_the_newest_checkpoints_name_their_call(admin_client, saver):
    run_subgraph_calls(saver, "agent", 3, per_turn=3)
    thread = Thread.objects.get(thread_id="agent")
    page = admin_client.get(f"{THREADS}{thread.pk}/change/").content.decode()
    table = page[page.index("<th>namespace</th>") :]
    assert re.search(r">act #3</td>", table) and re.search(r">root</td>", table)
