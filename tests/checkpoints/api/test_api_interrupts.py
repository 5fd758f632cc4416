"""The API shows a paused thread's pending tasks and interrupts, read without the graph."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from checkpoints.models import Thread
from checkpoints.store.registry import get_saver
from tests.checkpoints.timetravel.graphs import one_interrupt, subgraph_interrupt

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


def test_namespaces_listed_and_addressable(clients, users):
    """A subgraph's checkpoints: listed on the thread, read, walked and rolled back."""
    graph = subgraph_interrupt(get_saver(), [])
    config = {"configurable": {"thread_id": "nested"}}
    graph.invoke({"log": []}, config)
    Thread.objects.filter(thread_id="nested").update(owner=users["alice"])
    sub = graph.get_state(config, subgraphs=True).tasks[0].state
    ns = sub.config["configurable"]["checkpoint_ns"]
    alice = clients["alice"]

    assert alice.get("/api/threads/nested/").json()["namespaces"] == ["", ns]
    state = alice.get("/api/threads/nested/state/", {"checkpoint_ns": ns}).json()
    assert state["next"] == ["s2"] and state["config"]["configurable"]["checkpoint_ns"] == ns
    assert [i["value"] for i in state["interrupts"]] == ["inside?"]
    assert state["values"] == {"log": ["prep", "s1"]}
    page = alice.get("/api/threads/nested/history/", {"checkpoint_ns": ns}).json()["results"]
    before_s1 = next(s for s in page if s["next"] == ["s1"])
    rolled = alice.post(
        "/api/threads/nested/rollback/",
        {
            "checkpoint_id": before_s1["config"]["configurable"]["checkpoint_id"],
            "checkpoint_ns": ns,
        },
        format="json",
    )
    assert rolled.status_code == 200, rolled.content
    assert rolled.json()["next"] == ["s1"]
    assert rolled.json()["config"]["configurable"]["checkpoint_ns"] == ns
    # The root is untouched; the subgraph restarts from the rolled-back checkpoint.
    assert alice.get("/api/threads/nested/state/").json()["next"] == ["sub"]
    missing = alice.get("/api/threads/nested/state/", {"checkpoint_ns": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "checkpoint_ns"
