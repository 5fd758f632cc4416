"""The admin console in a real browser: Debian's Chromium driven by Playwright."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from checkpoints.models import Checkpoint, FinishedMark, Thread
from checkpoints.store.planning import utcnow
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_paused

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def newest(thread_id):
    return Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id")


def test_browse_thread_checkpoint_and_changes(page, saver, shot):
    run_chat(saver, "browse-me", turns=2)
    page.goto(f"{page.base}/admin/checkpoints/thread/")
    page.fill("#searchbar", "browse")
    page.press("#searchbar", "Enter")
    page.click("text=browse-me")
    page.wait_for_selector("text=not live: no filter claims it")
    shot(page, "thread")
    page.click("text=Checkpoints of this thread")
    page.wait_for_selector("text=History of thread browse-me, newest first")
    shot(page, "history")
    page.click("#result_list tbody tr:nth-child(2) th a")
    messages = page.locator("details.cs-value", has_text="messages").first
    # Messages read as a transcript at once; the stored JSON is one click away.
    transcript = messages.locator("table.cs-transcript")
    transcript.wait_for()
    assert transcript.is_visible() and "answer 2" in transcript.inner_text()
    assert "AI" in transcript.inner_text().upper()
    assert not messages.locator("pre").is_visible()
    messages.locator("summary.cs-hint", has_text="as stored (JSON)").click()
    assert messages.locator("pre").is_visible()
    # LangGraph's own channels are folded away behind one toggle.
    internals = page.locator("details.cs-internals")
    assert internals.count() == 1 and not internals.locator("details.cs-value").first.is_visible()
    shot(page, "checkpoint")
    page.click("text=What changed")
    page.wait_for_selector('[data-channel="messages"]')
    assert "1 item(s) added" in page.inner_text('[data-channel="messages"]')
    shot(page, "changes")


def test_rollback_through_the_confirmation(page, saver, shot):
    thread_id = run_chat(saver, "roll-me", turns=2)
    target = newest(thread_id)[3]
    page.goto(f"{page.base}/admin/checkpoints/checkpoint/{target.pk}/change/")
    page.click("text=Roll back to here")
    page.wait_for_selector("text=Current head (replaced)")
    assert target.checkpoint_id in page.inner_text("#content")
    shot(page, "rollback_confirmation")
    page.click("input[value='Yes, roll back']")
    page.wait_for_selector(".messagelist .success")
    assert f"rolled back to {target.checkpoint_id}" in page.inner_text(".messagelist")
    head = newest(thread_id).first()
    assert head.source == "rollback"
    assert re.search(rf"/checkpoint/{head.pk}/change/$", page.url)
    shot(page, "rollback")


def test_fork_with_an_edited_thread_id(page, saver, shot):
    thread_id = run_chat(saver, "fork-me", turns=1)
    source = newest(thread_id).first()
    page.goto(f"{page.base}/admin/checkpoints/checkpoint/{source.pk}/change/")
    page.click("text=Fork from here")
    field = page.locator("#id_new_thread_id")
    assert re.fullmatch(r"[0-9a-f-]{36}", field.input_value())
    field.fill("forked-in-browser")
    shot(page, "fork_confirmation")
    page.click("input[value='Yes, fork']")
    page.wait_for_selector(".messagelist .success")
    assert "forked-in-browser" in page.inner_text(".messagelist")
    forked = newest("forked-in-browser").first()
    assert forked.source == "fork"
    # The fork lands on the new thread's page; its message links back to the source.
    assert re.search(rf"/thread/{forked.thread_id}/change/$", page.url)
    back = page.locator(".messagelist a.cs-fork-source")
    assert back.inner_text() == f"checkpoint {source.checkpoint_id}"
    shot(page, "fork")
    back.click()
    page.wait_for_url(re.compile(rf"/checkpoint/{source.pk}/change/$"))


def test_sweep_dry_run_then_run_lists_the_spared_thread(page, saver, shot):
    long_ago = utcnow() - timedelta(days=30)
    run_chat(saver, "finished-long-ago", turns=1)
    mark_finished(saver, "finished-long-ago", owner="ops", now=long_ago)
    run_paused(saver, "waiting-for-approval")
    mark_finished(saver, "waiting-for-approval", owner="ops", now=long_ago)
    page.goto(f"{page.base}/admin/retention/sweeprun/")
    page.click("text=Run checkpoint sweep")
    page.wait_for_selector("text=Dry run: nothing has been deleted yet")
    spared = page.inner_text("#spared-threads")
    assert "waiting-for-approval" in spared and "interrupts" in spared
    shot(page, "sweep_dry_run")
    assert Thread.objects.filter(thread_id="finished-long-ago").exists()
    page.click("input[value='Run the sweep now']")
    page.wait_for_selector("text=The sweep ran")
    assert "1 thread(s) deleted" in page.inner_text("#sweep-counts")
    row = page.locator("#spared-threads tbody tr")
    assert row.count() == 1
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[:3] == ["waiting-for-approval", "finished", "interrupts"], cells
    # The spared thread says why in words: the question, and how long it has waited.
    assert cells[3].startswith("waiting on a human: “approve the answer?”, asked"), cells
    shot(page, "sweep")
    assert not Thread.objects.filter(thread_id="finished-long-ago").exists()
    assert FinishedMark.objects.filter(thread_id="waiting-for-approval").exists()
    row.locator("a").click()
    page.wait_for_selector("text=claimed by the")
    assert "waiting-for-approval" in page.inner_text("#content")
