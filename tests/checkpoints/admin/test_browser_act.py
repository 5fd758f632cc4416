"""Issue 54 item 7 in Chromium at 1400x900: a waiting thread's page shows its question and
the resume calls; editing a channel goes form -> confirmation -> the thread page, and the
thread's state is then what LangGraph's update_state gives. Screenshots kept as CI artifacts."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from checkpoints.models import AuditEvent, Thread
from tests.admin_fixtures import chat_graph, run_chat
from tests.browser_fixtures import csp_violations, watch_csp
from tests.checkpoints.langgraph_api import graphs as lg_graphs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CONFIG = {"configurable": {"thread_id": "wait-1"}, "metadata": {"graph_id": "agent"}}


def test_edit_state_confirm_flow(page, saver, settings, shot):
    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        "GRAPHS": {"agent": "tests.checkpoints.langgraph_api.graphs:graph"},
        "GRAPH_SERVER_URL": "https://lg.example.com",
    }
    page.set_viewport_size({"width": 1400, "height": 900})
    watch_csp(page)
    graph = lg_graphs.builder.compile(checkpointer=saver)
    graph.invoke({"topic": "ask"}, CONFIG)
    pk = Thread.objects.get(thread_id="wait-1").pk

    page.goto(f"{page.base}/admin/checkpoints/thread/{pk}/change/")
    assert "approve?" in page.locator("#cs-waiting .cs-question").inner_text()
    page.fill("#cs-answer", '"yes"')
    page.click(".cs-answer-form button")
    page.wait_for_selector(".cs-resume-python")
    python = page.locator(".cs-resume-python").inner_text()
    assert "graph.invoke(Command(resume='yes'), config)" in python
    assert "url='https://lg.example.com'" in python
    sdk = page.locator(".cs-resume-sdk").inner_text()
    assert "client.runs.create('wait-1', 'agent', command={\"resume\": 'yes'})" in sdk
    shot(page, "act-waiting-thread")

    page.click("a.cs-edit-state")
    page.select_option("#cs-channel", "notes")
    page.select_option("#cs-as-node", "write")
    page.fill("#cs-value", '["edited in the browser"]')
    page.click("input.cs-edit-review")
    page.wait_for_selector("#cs-edit-confirm")
    assert "edited in the browser" in page.locator(".cs-edit-new").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    shot(page, "act-edit-state-confirm")
    assert not AuditEvent.objects.filter(thread_id="wait-1").exists()
    page.click("input.cs-edit-yes")
    page.wait_for_selector(".messagelist .success")
    assert (
        "Channel notes of thread wait-1 updated as node write"
        in page.locator(".messagelist").inner_text()
    )
    assert csp_violations(page) == []

    reference = lg_graphs.builder.compile(checkpointer=InMemorySaver())
    reference.invoke({"topic": "ask"}, CONFIG)
    reference.update_state(CONFIG, {"notes": ["edited in the browser"]}, as_node="write")
    assert graph.get_state(CONFIG).values == reference.get_state(CONFIG).values
    assert AuditEvent.objects.get(thread_id="wait-1").action == "bulk_update"


def test_branch_switcher_in_place(page, saver, shot):
    page.set_viewport_size({"width": 1400, "height": 900})
    run_chat(saver, "branchy", turns=2)
    graph = chat_graph(saver)
    cfg = {"configurable": {"thread_id": "branchy"}}
    first = next(
        s for s in graph.get_state_history(cfg) if s.values.get("turn") == 1 and not s.next
    )
    graph.update_state(first.config, {"turn": 10}, as_node="review")
    pk = Thread.objects.get(thread_id="branchy").pk

    page.goto(f"{page.base}/admin/checkpoints/thread/{pk}/change/")
    assert page.locator(".cs-branch-count").inner_text().lower() == "branch 2 of 2"
    page.click("a.cs-branch-prev")
    page.wait_for_url("**branch_at=**")
    assert page.locator(".cs-branch-count").inner_text().lower() == "branch 1 of 2"
    page.locator("#cs-branches").scroll_into_view_if_needed()
    shot(page, "act-branches")
    page.click("a.cs-branch-next")
    page.wait_for_selector("#cs-branches")
    assert page.locator(".cs-branch-count").inner_text().lower() == "branch 2 of 2"
