"""The API shows a paused thread's pending tasks and interrupts, read without the graph."""

# ruff: noqa: F811

from __future__ import annotations

import pytest
from langgraph.types import Command

from checkpoints.models import Thread
from checkpoints.savers import get_saver
from tests.api_fixtures import clients, users  # noqa: F401
from tests.test_timetravel_parity import one_interrupt

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_state_shows_next_tasks_and_interrupts_of_a_paused_thread(clients, users):
    graph = one_interrupt(get_saver(), [])
    config = {"configurable": {"thread_id": "paused", "user_id": users["alice"].pk}}
    graph.invoke({"log": []}, config)
    Thread.objects.filter(thread_id="paused").update(owner=users["alice"])
    paused = graph.get_state(config)

    body = clients["alice"].get("/api/threads/paused/state/").json()
    assert body["next"] == ["approve"]
    assert [(t["id"], t["name"]) for t in body["pending_tasks"]] == [
        (paused.tasks[0].id, "approve")
    ]
    assert body["interrupts"] == [
        {"value": "approve the draft?", "id": paused.interrupts[0].id, "node": "approve"}
    ]

    graph.invoke(Command(resume="yes"), config)
    done = clients["alice"].get("/api/threads/paused/state/").json()
    assert done["next"] == [] and done["interrupts"] == [] and done["pending_tasks"] == []
