"""The REST bulk update and the threads API's update_state are one engine, on every provider:
with the thread's graph registered both run LangGraph's update_state (reducers, as_node);
without one both use the last-value fallback and refuse a channel that has a reducer. Each
change is one audit event of the same shape."""

from __future__ import annotations

import httpx
import pytest

from checkpoints.models import AuditEvent
from tests.checkpoints.langgraph_api.calls import call

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def rest(lg, who: str, thread_id: str, body: dict) -> httpx.Response:
    """POST /api/threads/{id}/bulk-update/ on the same server, with the same token."""
    base = lg.url.removesuffix("/langgraph")
    return httpx.post(
        f"{base}/api/threads/{thread_id}/bulk-update/",
        json=body,
        headers={"Authorization": f"Token {lg.tokens[who]}"},
    )


def state(lg, who: str, thread_id: str) -> dict:
    answer = call(lg, who, "GET", f"/threads/{thread_id}/state")
    assert answer.status_code == 200, answer.text
    return answer.json()


def audited(thread_id: str) -> list[dict]:
    rows = AuditEvent.objects.filter(action="bulk_update", thread_id=thread_id).order_by("id")
    return [row.detail for row in rows]


def test_with_the_graph_both_entrances_apply_reducers_and_as_node(lg):
    who = lg.owner()
    lg.run_graph("e-1")
    writes = [[{"channel": "notes", "value": ["rest"]}]]
    by_rest = rest(lg, who, "e-1", {"supersteps": writes, "graph": "agent", "as_node": "write"})
    assert by_rest.status_code == 200, by_rest.text
    body = by_rest.json()
    # LangGraph's own update: the reducer appends, the node's edge sets what runs next.
    assert body["values"]["notes"][-1:] == ["rest"] and len(body["values"]["notes"]) > 1
    assert body["metadata"]["source"] == "update" and body["next"] == ["review"]
    update = {"values": {"notes": ["lg"]}, "as_node": "write"}
    by_lg = call(lg, who, "POST", "/threads/e-1/state", update)
    assert by_lg.status_code == 200, by_lg.text
    head = state(lg, who, "e-1")
    assert head["values"]["notes"][-2:] == ["rest", "lg"] and head["next"] == ["review"]
    assert head["checkpoint"]["checkpoint_id"] == by_lg.json()["checkpoint"]["checkpoint_id"]
    first, second = audited("e-1")
    assert first == {
        "supersteps": 1,
        "channels": ["notes"],
        "new_head": body["config"]["configurable"]["checkpoint_id"],
        "as_node": ["write"],
        "graph": "agent",
    }
    assert second == first | {"new_head": head["checkpoint"]["checkpoint_id"]}
    # An unknown node is LangGraph's refusal, named, on both entrances; nothing written.
    bad = rest(lg, who, "e-1", {"supersteps": writes, "graph": "agent", "as_node": "nobody"})
    assert bad.status_code == 400 and "nobody" in bad.json()["error"]["message"], bad.text
    bad = call(lg, who, "POST", "/threads/e-1/state", {"values": {}, "as_node": "nobody"})
    assert bad.status_code == 422 and "nobody" in bad.json()["detail"], bad.text
    assert state(lg, who, "e-1") == head and len(audited("e-1")) == 2
    # One superstep writing a channel twice is two updates: LangGraph wants their node.
    twice = [[{"channel": "notes", "value": ["a"]}, {"channel": "notes", "value": ["b"]}]]
    unnamed = rest(lg, who, "e-1", {"supersteps": twice, "graph": "agent"})
    assert unnamed.status_code == 400, unnamed.text
    assert unnamed.json()["error"]["field"] == "as_node"
    named = rest(lg, who, "e-1", {"supersteps": twice, "graph": "agent", "as_node": "write"})
    assert named.status_code == 200, named.text
    assert named.json()["values"]["notes"][-4:] == ["rest", "lg", "a", "b"]


def test_without_a_graph_both_entrances_use_the_fallback(lg, settings):
    who = lg.owner()
    lg.run_graph("f-1")
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": {}}
    before = state(lg, who, "f-1")
    # A channel with a reducer is refused by both, naming it; nothing is written.
    by_rest = rest(lg, who, "f-1", {"supersteps": [[{"channel": "notes", "value": ["x"]}]]})
    assert by_rest.status_code == 400, by_rest.text
    message = by_rest.json()["error"]["message"]
    assert "'notes'" in message and 'CHECKPOINTS["GRAPHS"]' in message
    by_lg = call(lg, who, "POST", "/threads/f-1/state", {"values": {"notes": ["x"]}})
    assert by_lg.status_code == 422, by_lg.text
    detail = by_lg.json()["detail"]
    assert "'notes'" in detail and 'CHECKPOINTS["GRAPHS"]' in detail
    # as_node names a node no graph is there to run.
    named = call(lg, who, "POST", "/threads/f-1/state", {"values": {}, "as_node": "plan"})
    assert named.status_code == 422 and named.json()["field"] == "as_node", named.text
    assert state(lg, who, "f-1") == before and audited("f-1") == []
    # A last-value channel is written by both, as one bulk_update checkpoint each.
    by_rest = rest(lg, who, "f-1", {"supersteps": [[{"channel": "topic", "value": "rest"}]]})
    assert by_rest.status_code == 200, by_rest.text
    assert by_rest.json()["metadata"]["source"] == "bulk_update"
    by_lg = call(lg, who, "POST", "/threads/f-1/state", {"values": {"topic": "lg"}})
    assert by_lg.status_code == 200, by_lg.text
    head = state(lg, who, "f-1")
    assert head["values"]["topic"] == "lg" and head["values"]["notes"] == before["values"]["notes"]
    assert head["metadata"]["source"] == "bulk_update"
    assert [d["new_head"] for d in audited("f-1")] == [
        by_rest.json()["config"]["configurable"]["checkpoint_id"],
        head["checkpoint"]["checkpoint_id"],
    ]
    assert all(d["channels"] == ["topic"] and "graph" not in d for d in audited("f-1"))
    # The fallback updates the head only: an earlier checkpoint would branch the thread.
    earlier = before["checkpoint"]["checkpoint_id"]
    branch = call(
        lg, who, "POST", "/threads/f-1/state", {"values": {"topic": "x"}, "checkpoint_id": earlier}
    )
    assert branch.status_code == 422 and branch.json()["field"] == "checkpoint_id", branch.text
    assert state(lg, who, "f-1") == head
