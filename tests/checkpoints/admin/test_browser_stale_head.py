"""Issue 33 in a real browser: a rollback confirmed against a head the agent has since moved
is refused, the page shows the new head, and the store is left as it was."""

from __future__ import annotations

import re

import pytest

from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import chat_graph, run_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHECKPOINTS = "/admin/checkpoints/checkpoint/"
THREAD = "agent-chat"


def stored() -> list[tuple[str, str]]:
    return list(
        Checkpoint.objects.filter(thread__thread_id=THREAD)
        .order_by("checkpoint_id")
        .values_list("checkpoint_id", "source")
    )


def head_id() -> str:
    return (
        Checkpoint.objects.filter(thread__thread_id=THREAD)
        .order_by("-checkpoint_id")[0]
        .checkpoint_id
    )


def end_of_first_turn(saver) -> Checkpoint:
    config = {"configurable": {"thread_id": THREAD}}
    for snapshot in chat_graph(saver).get_state_history(config):
        if snapshot.values.get("turn") == 1 and not snapshot.next:
            wanted = snapshot.config["configurable"]["checkpoint_id"]
            return Checkpoint.objects.get(thread__thread_id=THREAD, checkpoint_id=wanted)
    raise AssertionError("the first turn never finished")


def test_rollback_against_a_head_the_agent_moved_is_refused(page, saver, shot):
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    run_chat(saver, THREAD, turns=10)
    target = end_of_first_turn(saver)
    seen = head_id()
    page.goto(f"{page.base}{CHECKPOINTS}{target.pk}/change/")
    page.click("text=Roll back to here")
    page.wait_for_selector("#discards")
    assert seen in page.inner_text("#current-head")
    counts = page.inner_text("#discard-counts")
    assert counts.startswith("18 messages discarded")
    assert "channels changed: notes, turn" in counts
    preview = page.locator(".cs-discarded-messages[data-channel='messages']")
    assert "question 10" in preview.inner_text() and "answer 2" in preview.inner_text()
    assert page.locator("input[name=expected_head]").input_value() == seen
    shot(page, "rollback-preview")

    # The agent takes another turn while the operator reads the page.
    run_chat(saver, THREAD, turns=1)
    written = stored()
    moved_to = head_id()
    assert moved_to != seen

    page.click("input[value='Yes, roll back']")
    page.wait_for_selector("#head-moved")
    refusal = page.inner_text("#head-moved")
    assert "Nothing was rolled back: the head moved since this page was shown." in refusal
    # In words: the head the page showed, the one written since, when and by which node.
    assert f"This page showed checkpoint {seen}, written " in refusal
    assert f"the head is now checkpoint {moved_to}, written " in refusal
    assert " by node " in refusal
    assert moved_to in page.inner_text("#current-head")
    assert seen not in page.inner_text("#current-head")
    assert page.inner_text("#discard-counts").startswith("20 messages discarded")
    assert page.locator("input[name=expected_head]").input_value() == moved_to
    assert page.locator(".messagelist .success").count() == 0
    shot(page, "stale-head-refused")
    assert stored() == written
    assert Thread.objects.get(thread_id=THREAD).version == 1
    assert re.search(rf"/checkpoint/{target.pk}/rollback/", page.url)
    assert [line for line in console if "Content Security Policy" in line] == []
