"""Issue 20's console in a real browser (Debian's Chromium via Playwright): each feature
clicked through as an operator would, with what the page shows asserted and a screenshot
of it saved. Data comes from real LangGraph runs on the saver and the time-travel service."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.admin import CheckpointAdmin
from checkpoints.models import Checkpoint, Thread
from checkpoints.store.planning import utcnow
from checkpoints.timetravel import TimeTravel
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_failing, run_paused, run_tools

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


def ordered(thread_id: str) -> list[Checkpoint]:
    """The thread's checkpoints, newest first (the history's order)."""
    return list(
        Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id", "-pk")
    )


def open_thread(page, thread_id: str) -> None:
    page.goto(f"{page.base}{THREADS}{Thread.objects.get(thread_id=thread_id).pk}/change/")
    page.wait_for_selector(".field-status_detail")


def listed_threads(page) -> set[str]:
    return {t.strip() for t in page.locator("#result_list tbody tr th a").all_inner_texts()}


def listed_checkpoints(page) -> list[str]:
    return [
        t.strip() for t in page.locator("#result_list .field-checkpoint_label").all_inner_texts()
    ]


def test_a_thread_waiting_on_a_human_shows_the_question_and_node(page, saver, shot):
    run_paused(saver, "needs-approval")
    run_chat(saver, "chatty", turns=1)
    page.goto(f"{page.base}{THREADS}")
    row = page.locator("#result_list tbody tr", has_text="needs-approval")
    status = row.locator(".field-status").inner_text()
    assert "Waiting on a human" in status and "“approve the answer?” at approve" in status
    other = page.locator("#result_list tbody tr", has_text="chatty").locator(".field-status")
    assert "Recently written" in other.inner_text()
    shot(page, "status_waiting_list")
    row.locator("th a").click()
    detail = page.locator(".field-status_detail")
    detail.wait_for()
    assert "Waiting on a human" in detail.inner_text()
    assert "“approve the answer?” at approve" in detail.inner_text()
    shot(page, "status_waiting_thread")


def test_the_status_filter_lists_each_status(page, saver, shot):
    run_paused(saver, "asks")
    run_failing(saver, "broke")
    run_chat(saver, "fresh", turns=1)
    run_chat(saver, "quiet", turns=1)
    run_chat(saver, "done", turns=1)
    Thread.objects.filter(thread_id="quiet").update(last_write_at=utcnow() - timedelta(days=2))
    mark_finished(saver, "done")
    page.goto(f"{page.base}{THREADS}")
    assert listed_threads(page) == {"asks", "broke", "fresh", "quiet", "done"}
    expected = {
        "Finished": ("finished", {"done"}),
        "Waiting on a human": ("waiting_on_human", {"asks"}),
        "Failed": ("failed", {"broke"}),
        "Recently written": ("recent", {"fresh"}),
        "Idle": ("idle", {"quiet"}),
    }
    for label, (kind, threads) in expected.items():
        choices = page.locator("#changelist-filter details[data-filter-title='status']")
        choices.get_by_role("link", name=label, exact=True).click()
        page.wait_for_url(re.compile(rf"status={kind}"))
        assert listed_threads(page) == threads, label
        statuses = page.locator("#result_list .field-status .cs-status").all_inner_texts()
        assert set(statuses) == {label}
        shot(page, f"status_filter_{kind}")


def test_the_checkpoint_tree_draws_heads_branches_and_forks(page, saver, shot):
    run_chat(saver, "story", turns=3)
    first = ordered("story")[::-1]
    travel = TimeTravel(saver)
    travel.rollback("story", first[4].checkpoint_id)
    run_chat(saver, "story", turns=1)
    travel.fork("story", first[2].checkpoint_id, new_thread_id="story-fork")
    stored = ordered("story")
    open_thread(page, "story")
    tree = page.locator("svg.cs-tree").first
    nodes = tree.locator("a.cs-node")
    assert nodes.count() == len(stored)
    assert {nodes.nth(i).get_attribute("data-checkpoint") for i in range(nodes.count())} == {
        c.checkpoint_id for c in stored
    }
    head = tree.locator("a.cs-head")
    assert head.count() == 1 and head.get_attribute("data-checkpoint") == stored[0].checkpoint_id
    # The rollback left the abandoned path on a lane of its own, below the head's.
    assert tree.locator("a.cs-node[data-source='rollback']").count() == 1
    lanes = {
        float(y)
        for y in tree.locator("a.cs-node circle[r='6']").evaluate_all(
            "cs => cs.map(c => c.getAttribute('cy'))"
        )
    }
    assert len(lanes) >= 2
    fork = tree.locator("a.cs-fork-link")
    assert fork.count() == 1
    assert fork.get_attribute("data-thread") == "story-fork"
    assert fork.get_attribute("data-origin") == first[2].checkpoint_id
    shot(page, "tree")
    fork.click()
    page.wait_for_selector(".field-thread_id")
    assert page.locator(".field-thread_id .readonly").inner_text() == "story-fork"
    shot(page, "tree_fork_opened")
    open_thread(page, "story")
    target = first[1]
    page.locator(f"svg.cs-tree a.cs-node[data-checkpoint='{target.checkpoint_id}']").click()
    page.wait_for_url(re.compile(rf"/checkpoint/{target.pk}/change/"))
    assert page.locator(".field-checkpoint_id .readonly").inner_text() == target.checkpoint_id
    shot(page, "tree_node_opened")


def test_history_rows_keyset_pages_and_jumps(page, saver, shot, monkeypatch):
    monkeypatch.setattr(CheckpointAdmin, "list_per_page", 5)
    run_chat(saver, "story", turns=3)
    stored = ordered("story")
    # A run takes well under a second; spread its checkpoints a minute apart so a jump to
    # a time (to the second) has rows on both sides of it.
    start = utcnow().replace(microsecond=0) - timedelta(hours=1)
    for n, row in enumerate(reversed(stored)):
        Checkpoint.objects.filter(pk=row.pk).update(created_at=start + timedelta(minutes=n))
    stored = ordered("story")
    open_thread(page, "story")
    page.click("text=Checkpoints of this thread")
    page.wait_for_selector("text=History of thread story, newest first")
    assert listed_checkpoints(page) == [c.checkpoint_id for c in stored[:5]]
    shot(page, "history_first_page")
    # Row by row: the node that wrote it, the time to the second, the stored size.
    seen, writers = [], set()
    while True:
        seen += listed_checkpoints(page)
        writers |= set(page.locator("#result_list .field-written_by").all_inner_texts())
        for text in page.locator("#result_list .field-created_seconds").all_inner_texts():
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text), text
        for text in page.locator("#result_list .field-stored_size").all_inner_texts():
            assert re.fullmatch(r"\d+ B", text), text
        older = page.locator("a.cs-older-page")
        if not older.count():
            break
        older.click()
        page.wait_for_url(re.compile(r"before="))
    assert seen == [c.checkpoint_id for c in stored]
    assert {"answer", "review"} <= writers
    shot(page, "history_oldest_page")
    page.click("a.cs-newer-page")
    page.wait_for_url(re.compile(r"after="))
    assert listed_checkpoints(page) == [c.checkpoint_id for c in stored[5:10]]
    shot(page, "history_newer_page")

    page.fill("input[name=step__lte]", "4")
    page.click(".cs-jump button")
    page.wait_for_url(re.compile(r"step__lte=4"))
    expected = next(c for c in stored if c.step <= 4)
    assert page.locator("mark.cs-target").inner_text() == expected.checkpoint_id
    assert listed_checkpoints(page)[0] == expected.checkpoint_id
    shot(page, "history_jump_to_step")

    moment = timezone.localtime(stored[6].created_at + timedelta(seconds=30))
    expected = stored[6]
    page.fill("input[name=step__lte]", "")
    page.fill("input[name=created_at__lte]", f"{moment:%Y-%m-%d %H:%M:%S}")
    page.click(".cs-jump button")
    page.wait_for_url(re.compile(r"created_at__lte="))
    assert page.locator("mark.cs-target").inner_text() == expected.checkpoint_id
    assert listed_checkpoints(page)[0] == expected.checkpoint_id
    shot(page, "history_jump_to_time")
    page.click("a.cs-newest-page")
    page.wait_for_selector("text=History of thread story, newest first")
    assert listed_checkpoints(page)[0] == stored[0].checkpoint_id


def test_a_checkpoint_page_reads_as_a_conversation(page, saver, shot):
    run_tools(saver, "support")
    stored = ordered("support")
    page.goto(f"{page.base}{CHECKPOINTS}{stored[0].pk}/change/")
    messages = page.locator("details.cs-value", has_text="messages").first
    transcript = messages.locator("table.cs-transcript")
    transcript.wait_for()
    # The text as written (the admin stylesheet capitalises table headers for display).
    roles = [r.strip() for r in transcript.locator("th.cs-role").all_text_contents()]
    assert roles == ["human", "ai", "tool · lookup_order", "ai"]
    said = transcript.locator(".cs-said").all_inner_texts()
    assert said == [
        "Where is order 42?",
        "Let me look that up.",
        "shipped 2026-11-30",
        "Order 42 shipped on Monday.",
    ]
    calls = transcript.locator("tr").nth(1).locator(".cs-muted").inner_text()
    assert calls.startswith("tool calls: lookup_order(") and '"order": 42' in calls
    # Each channel says how many bytes it takes in the store.
    assert re.search(r"4 messages · \d+ B stored", messages.locator("summary").first.inner_text())
    shot(page, "transcript")

    # LangGraph's bookkeeping channels (branch:to:*) sit on the checkpoints mid-run.
    mid_run = next(
        c
        for c in stored
        if any(
            str(k).startswith("branch:to:")
            for k in saver.get_tuple(
                {"configurable": {"thread_id": "support", "checkpoint_id": c.checkpoint_id}}
            ).checkpoint["channel_values"]
        )
    )
    page.goto(f"{page.base}{CHECKPOINTS}{mid_run.pk}/change/")
    internals = page.locator("details.cs-internals")
    assert internals.count() == 1
    assert "branch:to:" in internals.locator("summary").first.inner_text()
    inside = internals.locator("details.cs-value").first
    assert not inside.is_visible()
    internals.locator("summary").first.click()
    assert inside.is_visible()
    shot(page, "internals_open")


def test_older_and_newer_walk_a_thread_one_checkpoint_at_a_time(page, saver, shot):
    run_chat(saver, "walk", turns=1)
    stored = ordered("walk")
    page.goto(f"{page.base}{CHECKPOINTS}{stored[0].pk}/change/")
    assert page.locator(".cs-nav").inner_text().endswith("newest checkpoint")
    field = page.locator(".field-checkpoint_id .readonly")
    for expected in stored[1:]:
        page.click("a.cs-older")
        page.wait_for_url(re.compile(rf"/checkpoint/{expected.pk}/change/"))
        assert field.inner_text() == expected.checkpoint_id
    assert page.locator(".cs-nav").inner_text().startswith("first checkpoint")
    shot(page, "checkpoint_oldest")
    page.click("a.cs-newer")
    page.wait_for_url(re.compile(rf"/checkpoint/{stored[-2].pk}/change/"))
    assert field.inner_text() == stored[-2].checkpoint_id
    shot(page, "checkpoint_newer")


def test_mark_then_unmark_finished_is_logged_in_recent_actions(page, saver, shot):
    from django.contrib.admin.models import LogEntry

    run_chat(saver, "to-finish", turns=1)
    open_thread(page, "to-finish")
    status = page.locator(".field-status_detail .cs-status")
    assert status.inner_text() == "Recently written"
    page.click("button:has-text('Mark finished')")
    page.wait_for_selector(".messagelist .success")
    assert "Thread to-finish marked finished; due at" in page.inner_text(".messagelist")
    assert status.inner_text() == "Finished"
    assert page.locator("button:has-text('Unmark finished')").is_visible()
    shot(page, "marked_finished")
    page.click("button:has-text('Unmark finished')")
    page.wait_for_selector(".messagelist .success")
    assert "Thread to-finish waits again" in page.inner_text(".messagelist")
    assert status.inner_text() == "Recently written"
    assert page.locator("button:has-text('Mark finished')").is_visible()
    shot(page, "unmarked_finished")
    page.goto(f"{page.base}/admin/")
    recent = page.locator("#recent-actions-module")
    items = [t.split() for t in recent.locator("li").all_inner_texts()]
    assert items[:2] == [
        ["Changed:", "unmark_finished", "to-finish", "Thread"],
        ["Changed:", "mark_finished", "to-finish", "Thread"],
    ], items
    # Each line links to the thread's page.
    thread_url = f"{THREADS}{Thread.objects.get(thread_id='to-finish').pk}/change/"
    assert recent.locator("li a").first.get_attribute("href") == thread_url
    assert [e.object_repr for e in LogEntry.objects.order_by("-action_time", "-id")][:2] == [
        "unmark_finished to-finish",
        "mark_finished to-finish",
    ]
    shot(page, "recent_actions")


def test_an_unknown_provider_is_named_in_an_error(page, saver, shot):
    run_chat(saver, "kept", turns=1)
    page.goto(f"{page.base}{THREADS}?provider=nope")
    error = page.locator(".messagelist .error")
    error.wait_for()
    assert "There is no checkpoint store 'nope' in this admin" in error.inner_text()
    assert "Showing the deployment's own store instead." in error.inner_text()
    assert listed_threads(page) == {"kept"}
    shot(page, "unknown_provider")


def test_the_parks_page_on_sqlite_explains_why_it_is_empty(page, saver, shot):
    page.goto(f"{page.base}/admin/retention/park/")
    note = page.locator(".messagelist .info")
    note.wait_for()
    assert "This deployment's store is sqlite, which cannot hold a parked run" in note.inner_text()
    assert "Only postgres and redis stores park" in note.inner_text()
    assert page.locator("#result_list tbody tr").count() == 0
    shot(page, "parks_on_sqlite")
