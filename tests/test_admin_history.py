"""The checkpoint history in the admin: one row per checkpoint with the node that wrote it,
time to the second and size; a jump to a step or a time; older/newer on a checkpoint."""
# ruff: noqa: F811

from __future__ import annotations

import re

import pytest

from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_chat, saver  # noqa: F401

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
