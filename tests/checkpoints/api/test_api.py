"""The thread API: roles, ownership, history, state, time travel, errors and odd ids."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.test import APIClient

from checkpoints.models import Thread
from checkpoints.store.registry import get_saver
from tests.api_fixtures import assert_error, listed, run_demo, url

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def history_ids(client, thread_id: str, **params) -> list[str]:
    response = client.get(url(thread_id, "history"), params)
    assert response.status_code == 200, response.content
    return [s["config"]["configurable"]["checkpoint_id"] for s in response.json()["results"]]


def snapshot_at_step(client, thread_id: str, step: int) -> dict:
    # History items carry values only when asked.
    params = {"limit": 100, "select": "values,metadata,config,next"}
    response = client.get(url(thread_id, "history"), params)
    return next(s for s in response.json()["results"] if s["metadata"]["step"] == step)


# --- auth -----------------------------------------------------------------------------

ENDPOINTS = [
    ("get", "/api/threads/"),
    ("get", "/api/threads/alice-1/"),
    ("delete", "/api/threads/alice-1/"),
    ("get", "/api/threads/alice-1/history/"),
    ("get", "/api/threads/alice-1/state/"),
    ("post", "/api/threads/alice-1/rollback/"),
    ("post", "/api/threads/alice-1/fork/"),
    ("post", "/api/threads/alice-1/bulk-update/"),
    ("post", "/api/threads/alice-1/finish/"),
    ("delete", "/api/threads/alice-1/finish/"),
    ("post", "/api/threads/alice-1/retention/"),
    ("post", "/api/checkpoints/sweep/"),
    ("get", "/api/checkpoints/sweeps/"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_anonymous_gets_401_json_on_every_endpoint(clients, method, path):
    response = getattr(clients["anonymous"], method)(path, {}, format="json")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_bad_token_is_401(threads):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_error(client.get("/api/threads/"), 401, "authentication_failed")


def test_session_auth_works(users, threads):
    client = APIClient()
    assert client.login(username="alice", password="pw-alice")
    response = client.get("/api/threads/")
    assert response.status_code == 200
    assert {t["thread_id"] for t in response.json()["results"]} == {"alice-1", "a/b c?%#ü"}


# --- list -----------------------------------------------------------------------------


def test_each_user_lists_only_its_own_threads_and_staff_all(clients, threads):
    assert listed(clients["alice"]) == {"alice-1", "a/b c?%#ü"}
    assert listed(clients["bob"]) == {"bob-1"}
    assert listed(clients["staff"]) == {"alice-1", "a/b c?%#ü", "bob-1"}


def test_staff_filters_by_owner_id_or_username(clients, users, threads):
    assert listed(clients["staff"], owner="bob") == {"bob-1"}
    assert listed(clients["staff"], owner=str(users["alice"].pk)) == {"alice-1", "a/b c?%#ü"}
    assert listed(clients["staff"], owner="nobody") == set()
    # A non-staff owner filter can only narrow its own threads.
    assert listed(clients["alice"], owner="bob") == set()


def test_list_is_paginated(clients, threads):
    response = clients["staff"].get("/api/threads/", {"limit": 2})
    body = response.json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    second = clients["staff"].get(body["next"]).json()
    assert len(second["results"]) == 1


def test_list_filters_by_status(clients, threads):
    assert clients["alice"].post(url("alice-1", "finish")).status_code == 200
    assert listed(clients["alice"], state="finished") == {"alice-1"}
    assert listed(clients["alice"], state="waiting") == {"a/b c?%#ü"}
    # The status rule's kinds: marked and not yet due is "finished"; written now, "recent".
    assert listed(clients["alice"], status="finished") == {"alice-1"}
    assert listed(clients["alice"], status="recent") == {"a/b c?%#ü"}
    assert_error(clients["alice"].get("/api/threads/", {"status": "done"}), 400, field="status")
    assert_error(clients["alice"].get("/api/threads/", {"state": "done"}), 400, field="state")


# --- detail and delete ----------------------------------------------------------------


def test_detail_carries_version_etag(clients, users, threads):
    response = clients["alice"].get(url("alice-1"))
    assert response.status_code == 200
    body = response.json()
    assert body["thread_id"] == "alice-1"
    assert body["owner"] == {"id": users["alice"].pk, "username": "alice"}
    assert body["state"] == "waiting" and body["version"] == 1
    assert (body["status"], body["status_label"]) == ("recent", "Recently written")
    assert response["ETag"] == '"1"'


def test_other_users_thread_is_404_like_a_missing_one(clients, threads):
    other = assert_error(clients["alice"].get(url("bob-1")), 404, "thread_not_found", "thread_id")
    missing = assert_error(clients["alice"].get(url("nope")), 404, "thread_not_found")
    assert other["message"].replace("bob-1", "X") == missing["message"].replace("nope", "X")
    for action in ("history", "state"):
        assert_error(clients["alice"].get(url("bob-1", action)), 404, "thread_not_found")
    assert clients["staff"].get(url("bob-1")).status_code == 200


def test_delete_by_owner_removes_the_thread_others_get_404(clients, threads):
    assert_error(clients["bob"].delete(url("alice-1")), 404, "thread_not_found")
    assert get_saver().get_tuple({"configurable": {"thread_id": "alice-1"}}) is not None
    assert clients["alice"].delete(url("alice-1")).status_code == 204
    assert get_saver().get_tuple({"configurable": {"thread_id": "alice-1"}}) is None
    assert_error(clients["alice"].get(url("alice-1")), 404)


ODD_IDS = ["a/b/c", "with space", "ü/🙂", "100%", "q?x=1&y", "frag#1", "finish", "x/history", "."]


def test_odd_thread_ids_round_trip(clients, users):
    for thread_id in ODD_IDS:
        run_demo(thread_id, users["alice"])
    assert listed(clients["alice"]) == set(ODD_IDS)
    for thread_id in ODD_IDS:
        state = clients["alice"].get(url(thread_id, "state"))
        assert state.status_code == 200, (thread_id, state.content)
        assert state.json()["config"]["configurable"]["thread_id"] == thread_id
        history = history_ids(clients["alice"], thread_id)
        assert len(history) == 5
        if not thread_id.endswith("/history"):
            detail = clients["alice"].get(url(thread_id))
            assert detail.status_code == 200, (thread_id, detail.content)
            assert detail.json()["thread_id"] == thread_id
    # Slashes also work unencoded.
    assert clients["alice"].get("/api/threads/a/b/c/").json()["thread_id"] == "a/b/c"
    assert clients["alice"].post("/api/threads/a/b/c/finish/").json()["finished"] is True
    assert clients["alice"].delete(url("a/b/c")).status_code == 204
    assert "a/b/c" not in listed(clients["alice"])


def test_nul_in_thread_id_is_400(clients, threads):
    assert_error(clients["alice"].get("/api/threads/a%00b/"), 400, field="thread_id")


# --- history --------------------------------------------------------------------------


def test_history_pages_with_next_before(clients, threads):
    everything = history_ids(clients["alice"], "alice-1", limit=100)
    assert len(everything) == 5
    seen, before = [], None
    while True:
        params = {"limit": 2} | ({"before": before} if before else {})
        page = clients["alice"].get(url("alice-1", "history"), params).json()
        seen += [s["config"]["configurable"]["checkpoint_id"] for s in page["results"]]
        before = page["next_before"]
        if before is None:
            break
    assert seen == everything


def test_history_pages_follow_next_keeping_the_query(clients, threads):
    everything = history_ids(clients["alice"], "alice-1", limit=100)
    loops = history_ids(clients["alice"], "alice-1", limit=100, source="loop")
    seen = []
    link = url("alice-1", "history") + "?limit=2&source=loop&select=metadata,config"
    while link:
        page = clients["alice"].get(link).json()
        assert all(set(item) == {"metadata", "config"} for item in page["results"])
        seen += [s["config"]["configurable"]["checkpoint_id"] for s in page["results"]]
        assert (page["next"] is None) == (page["next_before"] is None)
        link = page["next"]
        if link:
            assert link.startswith("http://testserver/") and f"before={page['next_before']}" in link
    assert seen == loops and len(loops) == len(everything) - 1


def test_history_filters_by_source_and_metadata(clients, threads):
    assert len(history_ids(clients["alice"], "alice-1", source="loop")) == 4
    assert len(history_ids(clients["alice"], "alice-1", source="input")) == 1
    step_two = history_ids(clients["alice"], "alice-1", **{"metadata.step": "2"})
    assert step_two == [
        snapshot_at_step(clients["alice"], "alice-1", 2)["config"]["configurable"]["checkpoint_id"]
    ]
    # "2" parses as JSON (the number); a JSON string literal stays a string.
    assert history_ids(clients["alice"], "alice-1", **{"metadata.step": '"2"'}) == []
    assert len(history_ids(clients["alice"], "alice-1", **{"metadata.source": "loop"})) == 4


@pytest.mark.parametrize(
    "key", ["source.x", "x' OR '1'='1", "a b", "", "a;DROP TABLE x", "ü", "a" * 129]
)
def test_hostile_metadata_key_is_400_and_never_queried(clients, threads, key):
    with CaptureQueriesContext(connection) as queries:
        response = clients["alice"].get(url("alice-1", "history"), {f"metadata.{key}": "1"})
    assert_error(response, 400, "invalid_input", f"metadata.{key}")
    if key:
        assert not any(key in q["sql"] for q in queries.captured_queries)


def test_metadata_key_with_double_underscore_is_a_plain_key(clients, threads):
    # "step__gt" would be an ORM lookup if it were ever used as syntax; it is just a key.
    with CaptureQueriesContext(connection) as queries:
        ids = history_ids(clients["alice"], "alice-1", **{"metadata.step__gt": "0"})
    assert ids == []
    assert not any("step__gt" in q["sql"] for q in queries.captured_queries)


def test_hostile_metadata_value_is_plain_data(clients, threads):
    value = "loop' OR '1'='1"
    with CaptureQueriesContext(connection) as queries:
        ids = history_ids(clients["alice"], "alice-1", **{"metadata.source": value})
    assert ids == []
    assert not any(value in q["sql"] for q in queries.captured_queries)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"), ({"limit": "101"}, "limit")],
)
def test_history_bad_paging_is_400(clients, threads, params, field):
    assert_error(clients["alice"].get(url("alice-1", "history"), params), 400, field=field)


def test_history_before_unknown_checkpoint_is_404(clients, threads):
    response = clients["alice"].get(url("alice-1", "history"), {"before": "nope"})
    assert_error(response, 404, "checkpoint_not_found", "checkpoint_id")


# --- state ----------------------------------------------------------------------------


def test_state_latest_and_at_checkpoint(clients, threads):
    latest = clients["alice"].get(url("alice-1", "state"))
    assert latest.status_code == 200 and latest["ETag"] == '"1"'
    body = latest.json()
    assert body["values"]["approved"] is True
    assert body["values"]["messages"][-1] == "reviewer: looks good"
    assert body["metadata"]["step"] == 3
    old_id = snapshot_at_step(clients["alice"], "alice-1", 1)["config"]["configurable"]
    old = clients["alice"].get(url("alice-1", "state"), {"checkpoint_id": old_id["checkpoint_id"]})
    assert old.json()["values"]["messages"] == ["planner: outline a note about checkpoints"]
    missing = clients["alice"].get(url("alice-1", "state"), {"checkpoint_id": "nope"})
    assert_error(missing, 404, "checkpoint_not_found", "checkpoint_id")


def test_state_shows_the_stores_durability_stamp_beside_the_metadata(clients, threads):
    from checkpoints.store.registry import get_saver

    body = clients["alice"].get(url("alice-1", "state")).json()
    saver = get_saver()
    assert body["durability"] == saver.get_durability(body["config"])
    assert body["durability"]["level"] == saver.durability
    assert "_durability" not in body["metadata"]


# --- rollback -------------------------------------------------------------------------


def test_rollback_bumps_version_and_honours_if_match(clients, threads):
    target = snapshot_at_step(clients["alice"], "alice-1", 1)
    target_id = target["config"]["configurable"]["checkpoint_id"]
    first = clients["alice"].post(
        url("alice-1", "rollback"),
        {"checkpoint_id": target_id},
        format="json",
        HTTP_IF_MATCH='"1"',
    )
    assert first.status_code == 200, first.content
    assert first["ETag"] == '"2"'
    snapshot = first.json()
    assert snapshot["metadata"]["source"] == "rollback"
    assert snapshot["metadata"]["parents"] == [target_id]
    assert snapshot["metadata"]["rollback"]["target"] == target_id
    assert snapshot["values"] == target["values"]
    head_before = history_ids(clients["alice"], "alice-1", limit=1)
    stale = clients["alice"].post(
        url("alice-1", "rollback"),
        {"checkpoint_id": target_id},
        format="json",
        HTTP_IF_MATCH='"1"',
    )
    assert_error(stale, 409, "version_conflict")
    assert history_ids(clients["alice"], "alice-1", limit=1) == head_before
    fresh = clients["alice"].post(
        url("alice-1", "rollback"),
        {"checkpoint_id": target_id},
        format="json",
        HTTP_IF_MATCH='W/"2"',
    )
    assert fresh.status_code == 200 and fresh["ETag"] == '"3"'
    assert clients["alice"].get(url("alice-1")).json()["version"] == 3


@pytest.mark.parametrize(
    ("body", "headers", "field"),
    [
        ({}, {}, "checkpoint_id"),
        ({"checkpoint_id": ""}, {}, "checkpoint_id"),
        ({"checkpoint_id": ["x"]}, {}, "checkpoint_id"),
        ({"checkpoint_id": "x"}, {"HTTP_IF_MATCH": "version-one"}, "If-Match"),
    ],
)
def test_rollback_bad_input_is_400_naming_the_field(clients, threads, body, headers, field):
    response = clients["alice"].post(url("alice-1", "rollback"), body, format="json", **headers)
    assert_error(response, 400, field=field)
    assert clients["alice"].get(url("alice-1")).json()["version"] == 1


def test_rollback_on_another_users_thread_is_404(clients, threads):
    response = clients["bob"].post(
        url("alice-1", "rollback"), {"checkpoint_id": "x"}, format="json"
    )
    assert_error(response, 404, "thread_not_found")


# --- fork -----------------------------------------------------------------------------


def test_fork_creates_a_thread_owned_by_the_requester(clients, users, threads):
    source = snapshot_at_step(clients["alice"], "alice-1", 2)
    source_id = source["config"]["configurable"]["checkpoint_id"]
    response = clients["alice"].post(
        url("alice-1", "fork"),
        {"checkpoint_id": source_id, "new_thread_id": "alice/forked"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["config"]["configurable"]["thread_id"] == "alice/forked"
    assert body["metadata"]["source"] == "fork"
    assert body["metadata"]["forked_from"] == {"thread_id": "alice-1", "checkpoint_id": source_id}
    assert body["values"] == source["values"]
    assert "alice/forked" in listed(clients["alice"])
    assert clients["alice"].get(url("alice/forked")).json()["owner"]["username"] == "alice"
    # Staff forking alice's thread owns the fork; alice does not see it.
    staff_fork = clients["staff"].post(
        url("alice-1", "fork"), {"checkpoint_id": source_id}, format="json"
    )
    assert staff_fork.status_code == 201
    new_id = staff_fork.json()["config"]["configurable"]["thread_id"]
    assert Thread.objects.get(thread_id=new_id).owner == users["staff"]
    assert new_id not in listed(clients["alice"])


def test_fork_onto_an_existing_thread_is_409(clients, threads):
    source_id = history_ids(clients["alice"], "alice-1", limit=1)[0]
    response = clients["alice"].post(
        url("alice-1", "fork"),
        {"checkpoint_id": source_id, "new_thread_id": "bob-1"},
        format="json",
    )
    assert_error(response, 409, "thread_exists", "new_thread_id")
    assert Thread.objects.get(thread_id="bob-1").owner.username == "bob"


def test_fork_bad_input(clients, threads):
    response = clients["alice"].post(
        url("alice-1", "fork"), {"checkpoint_id": "nope"}, format="json"
    )
    assert_error(response, 404, "checkpoint_not_found", "checkpoint_id")
    source_id = history_ids(clients["alice"], "alice-1", limit=1)[0]
    response = clients["alice"].post(
        url("alice-1", "fork"),
        {"checkpoint_id": source_id, "new_thread_id": "a\x00b"},
        format="json",
    )
    assert_error(response, 400, field="new_thread_id")
    assert_error(clients["bob"].post(url("alice-1", "fork"), {}, format="json"), 404)


# --- bulk update ----------------------------------------------------------------------


def test_bulk_update_applies_last_value_writes(clients, threads):
    messages = clients["alice"].get(url("alice-1", "state")).json()["values"]["messages"]
    supersteps = [
        [{"channel": "topic", "value": "rewritten"}, {"channel": "turns", "value": 9}],
        [],
        [
            {"channel": "topic", "value": "overwritten"},
            {"channel": "topic", "value": "final"},
        ],
    ]
    response = clients["alice"].post(
        url("alice-1", "bulk-update"), {"supersteps": supersteps}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["metadata"]["source"] == "bulk_update"
    assert body["metadata"]["step"] == 6
    assert body["values"]["topic"] == "final"
    assert body["values"]["turns"] == 9
    assert body["values"]["messages"] == messages
    assert body["values"]["approved"] is True
    state = clients["alice"].get(url("alice-1", "state")).json()
    assert state["values"] == body["values"]


def test_bulk_update_of_a_channel_the_thread_never_held_is_refused(clients, threads):
    """Without the graph nothing tells a new channel from a typo: refused, naming it and the
    thread's channels, and nothing is written."""
    before = history_ids(clients["alice"], "alice-1", limit=100)
    supersteps = [[{"channel": "topic", "value": "t"}, {"channel": "topik", "value": "x"}]]
    response = clients["alice"].post(
        url("alice-1", "bulk-update"), {"supersteps": supersteps}, format="json"
    )
    assert response.status_code == 400, response.content
    message = response.json()["error"]["message"]
    assert "no channel 'topik'" in message and "topic" in message
    assert 'CHECKPOINTS["GRAPHS"]' in message
    assert history_ids(clients["alice"], "alice-1", limit=100) == before


def test_bulk_update_after_a_rollback_to_the_first_checkpoint_may_restore_a_channel(
    clients, threads
):
    """The rolled-back head holds only the input, but the thread's later checkpoints held
    `topic`: it is a channel of the thread, not a typo."""
    oldest = history_ids(clients["alice"], "alice-1", limit=100)[-1]
    rolled = clients["alice"].post(
        url("alice-1", "rollback"), {"checkpoint_id": oldest}, format="json"
    )
    assert rolled.status_code == 200, rolled.content
    supersteps = [[{"channel": "topic", "value": "restored"}]]
    response = clients["alice"].post(
        url("alice-1", "bulk-update"), {"supersteps": supersteps}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["values"]["topic"] == "restored"


def test_bulk_update_of_a_reducer_channel_without_the_graph_is_refused(clients, threads):
    """The demo's `messages` appends (operator.add): without the graph a write would
    replace the whole list, so it is refused naming the channel, and nothing is written."""
    before = history_ids(clients["alice"], "alice-1", limit=100)
    supersteps = [[{"channel": "topic", "value": "t"}, {"channel": "messages", "value": ["x"]}]]
    response = clients["alice"].post(
        url("alice-1", "bulk-update"), {"supersteps": supersteps}, format="json"
    )
    error = assert_error(response, 400, "invalid_input", "supersteps")
    assert "'messages'" in error["message"] and "'topic'" not in error["message"]
    assert 'CHECKPOINTS["GRAPHS"]' in error["message"]
    assert history_ids(clients["alice"], "alice-1", limit=100) == before


@override_settings(CHECKPOINTS={"GRAPHS": {"demo": "checkpoints.demo:graph"}})
def test_bulk_update_with_a_registered_graph_uses_its_reducers(clients, threads):
    messages = clients["alice"].get(url("alice-1", "state")).json()["values"]["messages"]
    supersteps = [
        [{"channel": "messages", "value": ["m1"]}],
        [{"channel": "messages", "value": ["m2"]}],
    ]
    response = clients["alice"].post(
        url("alice-1", "bulk-update"),
        {"supersteps": supersteps, "graph": "demo"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["values"]["messages"] == [*messages, "m1", "m2"]
    unknown = clients["alice"].post(
        url("alice-1", "bulk-update"), {"supersteps": supersteps, "graph": "nope"}, format="json"
    )
    assert_error(unknown, 400, "invalid_input", "graph")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "supersteps"),
        ({"supersteps": []}, "supersteps"),
        ({"supersteps": "x"}, "supersteps"),
        ({"supersteps": [[{"value": 1}]]}, "supersteps.0.0.channel"),
        ({"supersteps": [[{"channel": "__start__", "value": 1}]]}, "supersteps.0.0.channel"),
        ({"supersteps": [[{"channel": 5, "value": 1}]]}, "supersteps.0.0.channel"),
    ],
)
def test_bulk_update_bad_input_is_400(clients, threads, body, field):
    before = history_ids(clients["alice"], "alice-1", limit=100)
    response = clients["alice"].post(url("alice-1", "bulk-update"), body, format="json")
    assert_error(response, 400, field=field)
    assert history_ids(clients["alice"], "alice-1", limit=100) == before


# --- request-level errors -------------------------------------------------------------


def test_oversized_body_is_413(clients, threads):
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=200):
        response = clients["alice"].post(
            url("alice-1", "fork"), {"checkpoint_id": "x" * 500}, format="json"
        )
    assert_error(response, 413, "request_too_large")


def test_malformed_json_is_400(clients, threads):
    response = clients["alice"].post(
        url("alice-1", "rollback"), data="{not json", content_type="application/json"
    )
    assert_error(response, 400, "parse_error")


def test_non_json_body_is_415(clients, threads):
    response = clients["alice"].post(
        url("alice-1", "rollback"), data="checkpoint_id=x", content_type="text/plain"
    )
    assert_error(response, 415, "unsupported_media_type")


def test_wrong_method_is_405_json(clients, threads):
    assert_error(clients["alice"].put(url("alice-1"), {}, format="json"), 405)


def test_schema_is_served(clients):
    response = clients["alice"].get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/threads/{thread_id}/rollback/",
        "/api/threads/{thread_id}/finish/",
        "/api/checkpoints/sweep/",
    ):
        assert path in paths
    assert "last-value" in paths["/api/threads/{thread_id}/bulk-update/"]["post"]["description"]


# --- providers without ownership ------------------------------------------------------


@pytest.fixture
def memory_provider(settings):
    from checkpoints.store.memory import STORE

    STORE.clear()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "memory"}
    yield
    STORE.clear()


def test_memory_provider_only_staff_sees_threads(memory_provider, clients, users):
    from checkpoints.demo import build_demo_graph

    graph = build_demo_graph(get_saver())
    graph.invoke({"topic": "m"}, {"configurable": {"thread_id": "mem-1", "user_id": "alice"}})
    assert listed(clients["alice"]) == set()
    assert_error(clients["alice"].get(url("mem-1")), 404, "thread_not_found")
    assert listed(clients["staff"]) == {"mem-1"}
    detail = clients["staff"].get(url("mem-1"))
    assert detail.status_code == 200 and detail.json()["owner"] is None
    assert clients["staff"].get(url("mem-1", "state")).json()["values"]["topic"] == "m"
    assert clients["staff"].post(url("mem-1", "finish")).json()["finished"] is True
    assert listed(clients["staff"], status="finished") == {"mem-1"}


def test_longest_thread_id_the_store_takes_is_reachable(clients, users):
    longest = "é" * 512  # 1024 bytes of UTF-8: the store's limit
    run_demo(longest, users["alice"])
    assert clients["alice"].get(url(longest)).json()["thread_id"] == longest
    too_long = longest + "x"
    assert_error(clients["alice"].get(url(too_long, "state")), 400, "invalid_input", "thread_id")
    source_id = history_ids(clients["alice"], longest, limit=1)[0]
    response = clients["alice"].post(
        url(longest, "fork"),
        {"checkpoint_id": source_id, "new_thread_id": too_long},
        format="json",
    )
    assert_error(response, 400, field="new_thread_id")


def test_unmatched_api_url_answers_json_404(client):
    response = client.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "/api/nothing-here/" in response.json()["error"]["message"]
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and "error" not in page.content.decode()[:20]
