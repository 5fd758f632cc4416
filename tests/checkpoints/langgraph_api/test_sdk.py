"""langgraph-sdk's own client, sync and async, against /langgraph on a live server."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from checkpoints.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_thread_lifecycle_sync(lg):
    client = lg.sync(lg.owner())
    made = client.threads.create(thread_id="t-1", metadata={"team": "a"})
    assert made["thread_id"] == "t-1" and made["metadata"] == {"team": "a"}
    assert made["status"] == "idle" and made["values"] is None
    with pytest.raises(ConflictError):
        client.threads.create(thread_id="t-1")
    again = client.threads.create(thread_id="t-1", if_exists="do_nothing")
    assert again["metadata"] == {"team": "a"}
    updated = client.threads.update("t-1", metadata={"b": 2})
    assert updated["metadata"] == {"team": "a", "b": 2}
    assert client.threads.get("t-1")["metadata"] == {"team": "a", "b": 2}
    assert [t["thread_id"] for t in client.threads.search(metadata={"b": 2})] == ["t-1"]
    assert client.threads.count(metadata={"team": "a"}) == 1
    client.threads.delete("t-1")
    with pytest.raises(NotFoundError):
        client.threads.get("t-1")
    assert AuditEvent.objects.filter(action="delete_thread", thread_id="t-1").count() == 1


def test_graph_written_thread_state_history_and_update(lg):
    lg.run_graph("run-1")
    client = lg.sync(lg.owner())
    thread = client.threads.get("run-1")
    assert thread["status"] == "idle"
    assert thread["values"] == {
        "topic": "checkpoints",
        "notes": ["plan checkpoints", "write", "review"],
        "approved": True,
    }
    state = client.threads.get_state("run-1")
    assert state["next"] == [] and state["metadata"]["step"] == 3
    history = client.threads.get_history("run-1", limit=10)
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    older = client.threads.get_history("run-1", limit=2, before=history[1]["checkpoint"])
    assert [h["metadata"]["step"] for h in older] == [1, 0]
    at = client.threads.get_state("run-1", checkpoint_id=history[2]["checkpoint"]["checkpoint_id"])
    assert at["values"]["notes"] == ["plan checkpoints"] and at["next"] == ["write"]
    same = client.threads.get_state("run-1", checkpoint=history[2]["checkpoint"])
    assert same["checkpoint"] == at["checkpoint"]
    # The registered graph's reducer appends; as_node decides what runs next.
    done = client.threads.update_state("run-1", {"notes": ["extra"]}, as_node="write")
    head = client.threads.get_state("run-1")
    assert head["checkpoint"]["checkpoint_id"] == done["checkpoint"]["checkpoint_id"]
    assert head["values"]["notes"][-1] == "extra" and len(head["values"]["notes"]) == 4
    assert head["next"] == ["review"] and head["metadata"]["source"] == "update"
    with pytest.raises(UnprocessableEntityError):
        client.threads.update_state("run-1", {"notes": ["x"]}, as_node="nope")


def test_interrupted_thread(lg):
    lg.run_graph("ask-1", topic="ask")
    thread = lg.sync(lg.owner()).threads.get("ask-1")
    assert thread["status"] == "interrupted"
    [(task_id, [interrupt])] = thread["interrupts"].items()
    assert interrupt["value"] == {"question": "approve?"}
    state = lg.sync(lg.owner()).threads.get_state("ask-1")
    assert state["tasks"][0]["id"] == task_id and state["next"] == ["review"]
    assert [t["thread_id"] for t in lg.sync(lg.owner()).threads.search(status="interrupted")] == [
        "ask-1"
    ]


def test_copy_and_prune(lg):
    lg.run_graph("src")
    client = lg.sync(lg.owner())
    copy = client.threads.copy("src")
    assert copy["thread_id"] != "src" and copy["values"] == client.threads.get("src")["values"]
    assert len(client.threads.get_history(copy["thread_id"])) == 5
    assert client.threads.prune(["src"], strategy="keep_latest") == {"pruned_count": 1}
    kept = client.threads.get_history("src")
    assert [h["metadata"]["step"] for h in kept] == [3]
    assert client.threads.prune([copy["thread_id"]]) == {"pruned_count": 1}
    with pytest.raises(NotFoundError):
        client.threads.get(copy["thread_id"])
    assert AuditEvent.objects.filter(action="prune", thread_id="src").exists()
    assert AuditEvent.objects.filter(action="copy_thread", thread_id=copy["thread_id"]).exists()


def test_supersteps_run_through_the_graph(lg):
    client = lg.sync(lg.owner())
    made = client.threads.create(
        thread_id="ss",
        graph_id="agent",
        supersteps=[
            {"updates": [{"values": {"topic": "x", "notes": ["a"]}, "as_node": "plan"}]},
            {"updates": [{"values": {"notes": ["b"]}, "as_node": "write"}]},
        ],
    )
    assert made["values"] == {"topic": "x", "notes": ["a", "b"]}
    assert client.threads.get_state("ss")["next"] == ["review"]


def test_update_state_without_a_graph_refuses_a_reducer_channel(lg, settings):
    """Without the graph the REST API's last-value fallback applies: `notes` appends, so a
    write would replace it; refused naming the way out, and nothing is written."""
    lg.run_graph("g")
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": {}}
    before = lg.sync(lg.owner()).threads.get_state("g")
    with pytest.raises(UnprocessableEntityError) as caught:
        lg.sync(lg.owner()).threads.update_state("g", {"notes": ["x"]})
    detail = caught.value.response.json()["detail"]
    assert "'notes'" in detail and 'CHECKPOINTS["GRAPHS"]' in detail
    assert lg.sync(lg.owner()).threads.get_state("g") == before


def test_ttl_is_the_declared_retention(lg, settings):
    client = lg.sync(lg.owner())
    client.threads.create(thread_id="ttl", ttl=60)
    from checkpoints.store.registry import get_saver

    assert get_saver().thread_retention("ttl").waiting_minutes == 60
    too_long = settings.CHECKPOINTS["RETENTION_WAITING_MINUTES"] + 1
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.threads.update("ttl", metadata={}, ttl=too_long)
    detail = caught.value.response.json()["detail"]
    assert str(too_long) in detail and str(settings.CHECKPOINTS["RETENTION_WAITING_MINUTES"]) in (
        detail
    )
    assert caught.value.response.status_code == 422
    assert get_saver().thread_retention("ttl").waiting_minutes == 60
    with pytest.raises(httpx.HTTPStatusError):
        client.threads.create(thread_id="ttl-2", ttl=too_long)
    with pytest.raises(NotFoundError):
        client.threads.get("ttl-2")


def test_owner_isolation(lg):
    # On redis the store records no owners: as in the REST API, only staff see threads.
    lg.run_graph("alice-1", owner="alice" if lg.isolates else "staff")
    bob = lg.sync("bob")
    for call in (
        lambda: bob.threads.get("alice-1"),
        lambda: bob.threads.get_state("alice-1"),
        lambda: bob.threads.get_history("alice-1"),
        lambda: bob.threads.update("alice-1", metadata={"x": 1}),
        lambda: bob.threads.update_state("alice-1", {"notes": ["x"]}),
        lambda: bob.threads.copy("alice-1"),
        lambda: bob.http.get("/threads/alice-1/storage"),
        lambda: bob.threads.prune(["alice-1"]),
        lambda: bob.threads.delete("alice-1"),
    ):
        with pytest.raises(NotFoundError):
            call()
    assert bob.threads.search() == [] and bob.threads.count() == 0
    assert bob.threads.search(ids=["alice-1"]) == []
    assert lg.sync("alice").threads.count() == (1 if lg.isolates else 0)
    # Staff see it: with the REST API's staff powers.
    assert lg.sync("staff").threads.get("alice-1")["thread_id"] == "alice-1"


def test_auth_and_errors_are_json(lg):
    url = lg.url
    assert httpx.get(f"{url}/threads/x").status_code == 401
    bad = httpx.get(f"{url}/threads/x", headers={"x-api-key": "nope"})
    assert bad.status_code == 401 and "detail" in bad.json()
    token = {"Authorization": f"Token {lg.tokens['alice']}"}
    missing = httpx.get(f"{url}/threads/none", headers=token)
    assert missing.status_code == 404 and "none" in missing.json()["detail"]
    for body in (b"[1]", b"{", b'{"limit": "x"}', b'{"status": "sleepy"}'):
        r = httpx.post(
            f"{url}/threads/search",
            content=body,
            headers={**token, "Content-Type": "application/json"},
        )
        assert r.status_code == 422 and "detail" in r.json(), (body, r.text)
    # A state at a checkpoint is read-only: update_state posts to /state (found by schemathesis).
    assert httpx.post(f"{url}/threads/x/state/0", headers=token).status_code == 405
    # Platform routes not served are 501s (test_meta_and_assistants covers the whole table);
    # a path that is no Platform route stays a 404.
    for path in ("/runs", "/threads/x/runs", "/assistants"):
        r = httpx.post(f"{url}{path}", headers=token)
        assert r.status_code == 501 and "not part of this server" in r.json()["detail"], path
    assert httpx.post(f"{url}/crons", headers=token).status_code == 404
    # Every route of a thread's runs, as the SDK's runs client calls them.
    for method, path in (
        ("POST", "/threads/x/runs/wait"),
        ("POST", "/threads/x/runs/stream"),
        ("GET", "/threads/x/runs/run-1"),
        ("GET", "/threads/x/runs/run-1/join"),
        ("POST", "/threads/x/runs/run-1/cancel"),
        ("POST", "/threads/x/runs/crons"),
        ("GET", "/threads/x/runs"),
    ):
        r = httpx.request(method, f"{url}{path}", headers=token)
        assert r.status_code == 501 and "not part of this server" in r.json()["detail"], path
    with pytest.raises(httpx.HTTPStatusError) as caught:
        lg.sync("alice").runs.wait("x", "agent", input={})
    assert caught.value.response.status_code == 501
    assert "runs no graph" in caught.value.response.json()["detail"]


def test_a_values_search_passes_over_threads_with_no_state(lg):
    """A created thread has values null; a search on values skips it (found by schemathesis:
    it was a 500)."""
    client = lg.sync(lg.owner())
    empty = client.threads.create(metadata={"kind": "empty"})
    assert client.threads.get(empty["thread_id"])["values"] is None
    assert client.threads.search(values={"topic": "x"}) == []
    assert client.threads.search(metadata={"kind": "empty"}, values={}) != []


def test_updates_langgraph_refuses_are_422s(lg):
    """LangGraph's own refusals of an update are the caller's input (schemathesis found
    them as 500s): supersteps with no update, a state in a subgraph the graph lacks."""
    import httpx

    lg.run_graph("refused-1", owner=lg.owner())
    client = lg.sync(lg.owner())
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.threads.create(thread_id="refused-2", supersteps=[{"updates": []}])
    assert caught.value.response.status_code == 422
    assert "No updates provided" in caught.value.response.json()["detail"]
    with pytest.raises(httpx.HTTPStatusError) as caught:
        client.threads.update_state(
            "refused-1", {"notes": ["x"]}, checkpoint={"checkpoint_ns": "nowhere"}
        )
    assert caught.value.response.status_code == 422
    assert "nowhere" in caught.value.response.json()["detail"]


def test_staff_change_metadata_only_with_the_permission(lg):
    from django.contrib.auth.models import User
    from langgraph_sdk import get_sync_client
    from rest_framework.authtoken.models import Token

    lg.run_graph("alice-1", owner=lg.owner())
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    sdk = get_sync_client(url=lg.url, api_key=Token.objects.create(user=clerk).key)
    assert sdk.threads.get("alice-1")["thread_id"] == "alice-1"  # staff see every thread
    with pytest.raises(httpx.HTTPStatusError) as caught:
        sdk.threads.update("alice-1", metadata={"x": 1})
    assert caught.value.response.status_code == 403
    assert "checkpoints.change_thread" in caught.value.response.json()["detail"]
    assert "x" not in lg.sync("staff").threads.get("alice-1")["metadata"]
    # Staff holding it may; so may the owner, who needs none.
    assert lg.sync("staff").threads.update("alice-1", metadata={"x": 1})["metadata"]["x"] == 1
    owner = lg.sync(lg.owner())
    assert owner.threads.update("alice-1", metadata={"y": 2})["metadata"]["y"] == 2


def test_async_client(lg):
    lg.run_graph("async-1")

    async def calls():
        client = lg.aclient(lg.owner())
        made = await client.threads.create(metadata={"k": "v"})
        found = await client.threads.search(metadata={"k": "v"})
        state = await client.threads.get_state("async-1")
        history = await client.threads.get_history("async-1", limit=2)
        await client.threads.update_state("async-1", {"notes": ["z"]}, as_node="review")
        head = await client.threads.get("async-1")
        await client.threads.delete(made["thread_id"])
        return made, found, state, history, head

    made, found, state, history, head = asyncio.run(calls())
    assert [t["thread_id"] for t in found] == [made["thread_id"]]
    assert state["values"]["approved"] is True and len(history) == 2
    assert head["values"]["notes"][-1] == "z"


def test_storage_bytes_by_table_and_channel(lg):
    # The SDK has no method for it: its http helper carries the key and maps errors.
    lg.run_graph("sized-1", topic="x" * 5_000)
    client = lg.sync(lg.owner())
    sized = client.http.get("/threads/sized-1/storage")
    assert sized["thread_id"] == "sized-1"
    assert set(sized["tables"]) == {"checkpoints", "channel_values", "pending_writes"}
    assert sized["total_bytes"] == sum(sized["tables"].values())
    assert sized["channels"]["topic"] >= 5_000 > sized["channels"]["approved"]
    assert set(sized["channels"]) >= {"topic", "notes", "approved"}
    with pytest.raises(NotFoundError):
        lg.sync("bob").http.get("/threads/sized-1/storage")
    with pytest.raises(NotFoundError):
        client.http.get("/threads/none/storage")


def test_search_and_count_arguments(lg):
    # The SDK's search arguments beyond metadata: values, ids, status, paging, sort, select.
    for thread_id in ("a-1", "a-2", "a-3"):
        lg.run_graph(thread_id)
    lg.run_graph("ask-9", topic="ask")
    client = lg.sync(lg.owner())
    everyone = {"a-1", "a-2", "a-3", "ask-9"}
    assert {t["thread_id"] for t in client.threads.search(limit=10)} == everyone
    by_value = client.threads.search(values={"approved": True}, limit=10)
    assert {t["thread_id"] for t in by_value} == {"a-1", "a-2", "a-3"}
    picked = client.threads.search(ids=["a-2", "ask-9", "nope"], limit=10)
    assert {t["thread_id"] for t in picked} == {"a-2", "ask-9"}
    assert [t["thread_id"] for t in client.threads.search(status="interrupted")] == ["ask-9"]
    assert client.threads.count(status="interrupted") == 1
    assert client.threads.count(status="idle") == 3
    assert client.threads.count(values={"approved": True}) == 3
    ascending = client.threads.search(sort_by="thread_id", sort_order="asc", limit=10)
    assert [t["thread_id"] for t in ascending] == sorted(everyone)
    descending = client.threads.search(sort_by="thread_id", sort_order="desc", limit=10)
    assert [t["thread_id"] for t in descending] == sorted(everyone, reverse=True)
    pages = [
        t["thread_id"]
        for offset in (0, 2)
        for t in client.threads.search(
            sort_by="thread_id", sort_order="asc", limit=2, offset=offset
        )
    ]
    assert pages == sorted(everyone)
    slim = client.threads.search(ids=["a-1"], select=["thread_id", "status"])
    assert slim == [{"thread_id": "a-1", "status": "idle"}]


def test_history_select_and_filters(lg):
    lg.run_graph("h-1")
    client = lg.sync(lg.owner())
    history = client.threads.get_history("h-1", limit=10)
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    loops = client.threads.get_history("h-1", limit=10, metadata={"source": "loop"})
    assert [h["metadata"]["step"] for h in loops] == [3, 2, 1, 0]
    at = client.threads.get_history("h-1", limit=10, checkpoint=history[2]["checkpoint"])
    assert [h["metadata"]["step"] for h in at] == [1]
    # ``before`` and ``metadata`` still apply to the one checkpoint asked for.
    one = history[2]["checkpoint"]
    assert client.threads.get_history("h-1", checkpoint=one, before=history[3]["checkpoint"]) == []
    assert client.threads.get_history("h-1", checkpoint=one, metadata={"source": "input"}) == []
    assert client.threads.get_history("h-1", checkpoint={**one, "checkpoint_id": "nope"}) == []
