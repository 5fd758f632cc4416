"""The checkpoint history in the admin: one row per checkpoint with the node that wrote it,
time to the second and size; a jump to a step or a time; older/newer on a checkpoint."""

from __future__ import annotations

import re

import pytest

from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


@pytest.fixture
def chat(saver):
    return run_chat(saver, "story", turns=3)


def rows(page: str) -> list[str]:
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return body.split("</tr>")[:-1]


def history(client, **params) -> str:
    pk = Thread.objects.get(thread_id="story").pk
    return client.get(CHECKPOINTS, {"thread__id__exact": pk, **params}).content.decode()


def test_each_row_names_the_nodes_that_wrote_it_with_seconds_and_size(admin_client, chat):
    listed = rows(history(admin_client))
    by_id = {c.checkpoint_id: c for c in Checkpoint.objects.filter(thread__thread_id="story")}
    assert len(listed) == len(by_id) == 12
    written = {
        c.step: next(r for r in listed if c.checkpoint_id in r)
        for c in by_id.values()
        if c.source == "loop"
    }
    assert "field-written_by" in written[1] and ">answer<" in written[1]
    assert ">review<" in written[2]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", written[2])
    assert re.search(r'field-stored_size">\d+ B<', written[2])


def test_the_page_reads_its_nodes_in_one_query_and_links_its_thread_once(admin_client, chat):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        page = history(admin_client)
    reads = [q["sql"] for q in queries if "task_path" in q["sql"]]
    # One IN list for the page's thread, not an OR of a condition per row.
    assert len(reads) == 1 and " IN (" in reads[0] and " OR " not in reads[0], reads
    thread = Thread.objects.get(thread_id="story")
    link = f'href="/admin/checkpoints/thread/{thread.pk}/change/"'
    assert all(link in row for row in rows(page)) and len(rows(page)) == 12


def test_jump_to_a_step_keeps_the_thread_and_lists_from_there(admin_client, chat):
    page = history(admin_client, step__lte=1)
    steps = [int(s) for s in re.findall(r'field-step">(-?\d+)<', page)]
    assert steps and max(steps) == 1
    assert 'name="step__lte" value="1"' in page and ">newest</a>" in page
    assert "History of thread story" in page


def test_older_and_newer_links_walk_the_thread(admin_client, chat):
    ordered = list(Checkpoint.objects.filter(thread__thread_id="story").order_by("checkpoint_id"))
    middle = ordered[5]
    page = admin_client.get(f"{CHECKPOINTS}{middle.pk}/change/").content.decode()
    assert f'class="cs-older" href="{CHECKPOINTS}{ordered[4].pk}/change/"' in page
    assert f'class="cs-newer" href="{CHECKPOINTS}{ordered[6].pk}/change/"' in page
    first = admin_client.get(f"{CHECKPOINTS}{ordered[0].pk}/change/").content.decode()
    assert "first checkpoint" in first and "cs-older" not in first
    last = admin_client.get(f"{CHECKPOINTS}{ordered[-1].pk}/change/").content.decode()
    assert "newest checkpoint" in last and "cs-newer" not in last


def test_state_shows_sizes_and_folds_internals(admin_client, chat):
    head = Checkpoint.objects.filter(thread__thread_id="story").order_by("-checkpoint_id")[0]
    page = admin_client.get(f"{CHECKPOINTS}{head.pk}/change/").content.decode()
    assert re.search(r"<strong>messages</strong> <span class=\"cs-hint\">.*B stored", page)
    assert '<table class="cs-table cs-transcript">' in page
    assert '>human</th><td><div class="cs-said">question 3<' in page


def test_langgraph_internals_sit_behind_one_toggle(admin_client, chat):
    pages = [
        admin_client.get(f"{CHECKPOINTS}{c.pk}/change/").content.decode()
        for c in Checkpoint.objects.filter(thread__thread_id="story")
    ]
    with_internals = [p for p in pages if "<strong>branch:to:" in p]
    assert with_internals, "a LangGraph run stores branch:to:* channels on some checkpoint"
    for page in with_internals:
        fold = page.index('<details class="cs-internals">')
        assert page.index("<strong>branch:to:") > fold
        if "<strong>messages</strong>" in page:
            assert page.index("<strong>messages</strong>") < fold


def _tree(page: str) -> list[str]:
    return re.findall(r"<svg class=\"cs-tree\".*?</svg>", page, flags=re.S)


def test_the_thread_page_draws_its_checkpoint_tree_with_branches(admin_client, saver, chat):
    import xml.etree.ElementTree as ET

    from checkpoints.timetravel import TimeTravel

    ordered = list(Checkpoint.objects.filter(thread__thread_id="story").order_by("checkpoint_id"))
    TimeTravel(saver).rollback("story", ordered[4].checkpoint_id)
    run_chat(saver, "story", turns=1)
    pk = Thread.objects.get(thread_id="story").pk
    page = admin_client.get(f"/admin/checkpoints/thread/{pk}/change/").content.decode()
    (svg,) = _tree(page)
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    links = root.findall("s:a", ns)
    stored = {c.checkpoint_id: c.pk for c in Checkpoint.objects.filter(thread_id=pk)}
    assert len(links) == len(stored)
    for a in links:
        assert a.get("href") == f"{CHECKPOINTS}{stored[a.get('data-checkpoint')]}/change/"
    heads = [a for a in links if "cs-head" in a.get("class")]
    newest = max(stored)
    assert [a.get("data-checkpoint") for a in heads] == [newest]
    # The rollback started a branch: its nodes sit in a lane below the abandoned path.
    ys = {a.get("data-checkpoint"): float(a.findall("s:circle", ns)[-1].get("cy")) for a in links}
    assert len(set(ys.values())) >= 2
    assert ys[newest] == min(ys.values())
    assert any(a.get("data-source") == "rollback" for a in links)
    assert len(root.findall("s:path", ns)) == len(stored) - 1


def test_the_tree_is_windowed(admin_client, saver, chat, monkeypatch):
    from checkpoints.admin import tree as admin_tree

    monkeypatch.setattr(admin_tree, "WINDOW", 5)
    pk = Thread.objects.get(thread_id="story").pk
    page = admin_client.get(f"/admin/checkpoints/thread/{pk}/change/").content.decode()
    (svg,) = _tree(page)
    assert svg.count("<a href=") == 5
    assert "Showing the newest 5 checkpoints; 7 older ones are in the history." in page


def test_a_fork_shows_in_the_tree_as_a_link_to_the_forked_thread(admin_client, saver, chat):
    import xml.etree.ElementTree as ET

    from checkpoints.timetravel import TimeTravel

    origin = Checkpoint.objects.filter(thread__thread_id="story").order_by("checkpoint_id")[3]
    TimeTravel(saver).fork("story", origin.checkpoint_id, new_thread_id="story-branch")
    pk = Thread.objects.get(thread_id="story").pk
    page = admin_client.get(f"/admin/checkpoints/thread/{pk}/change/").content.decode()
    (svg,) = _tree(page)
    forks = ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}a[@class='cs-fork-link']")
    branch = Thread.objects.get(thread_id="story-branch").pk
    assert [(a.get("data-thread"), a.get("data-origin"), a.get("href")) for a in forks] == [
        ("story-branch", origin.checkpoint_id, f"/admin/checkpoints/thread/{branch}/change/")
    ]
