"""/langgraph as an attacker calls it: bounded id lists, the REST API's throttles on its
destructive routes, owners and store keys never taken from client metadata, searches that
survive an unreadable thread, and reducer refusals as 422s."""

from __future__ import annotations

import httpx
import pytest
from django.core.cache import cache
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from checkpoints.api.base import STORE_METADATA_KEYS
from checkpoints.langgraph_api import views
from checkpoints.langgraph_api.parsing import IDS_MAX, PRUNE_MAX, SEARCH_MAX
from checkpoints.store.registry import get_saver
from tests.checkpoints.langgraph_api.calls import call, refused
from tests.store_helpers import corrupt_values

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

PICKLED = ("pickle", b"\x80\x04K\x01.")


# --- ids, limit and prune bounds --------------------------------------------------------


@pytest.mark.parametrize("route", ["search", "count"])
def test_ids_are_bounded_and_checked(lg, route):
    lg.run_graph("kept")
    who = lg.owner()
    named = [f"none-{i}" for i in range(IDS_MAX - 1)] + ["kept"]
    found = call(lg, who, "POST", f"/threads/{route}", {"ids": named})
    assert found.status_code == 200, found.text
    if route == "search":
        assert [t["thread_id"] for t in found.json()] == ["kept"]
    else:
        assert found.json() == 1
    over = call(lg, who, "POST", f"/threads/{route}", {"ids": [*named, "one-more"]})
    refused(over, "ids", str(IDS_MAX), str(IDS_MAX + 1))
    for i, bad in enumerate((["x"], 5, None, "a\x00b", "\ud800", "")):
        answer = call(lg, who, "POST", f"/threads/{route}", {"ids": ["kept", bad]})
        refused(answer, "ids[1]")
        assert answer.status_code != 500, (i, bad)
    # A lone surrogate as the SDK's JSON carries it: an escape no UTF-8 text can hold.
    raw = call(lg, who, "POST", f"/threads/{route}", raw=b'{"ids": ["\\ud800"]}')
    refused(raw, "ids[0]", "surrogate")


def test_search_limit_is_refused_above_its_bound(lg):
    too_many = call(lg, lg.owner(), "POST", "/threads/search", {"limit": SEARCH_MAX + 1})
    refused(too_many, "limit", str(SEARCH_MAX))
    assert call(lg, lg.owner(), "POST", "/threads/search", {"limit": SEARCH_MAX}).json() == []


@pytest.mark.parametrize("lg", ["sqlite", "postgres"], indirect=True)
def test_ids_are_looked_up_in_one_query(lg):
    """As many queries for 1,000 ids as for 10: no lookup per id."""
    lg.run_graph("kept")
    client = Client(HTTP_X_API_KEY=lg.tokens[lg.owner()])
    store = connections[get_saver().db_alias]

    def queries(ids: list[str]) -> int:
        with CaptureQueriesContext(store) as seen:
            answer = client.post("/langgraph/threads/search", {"ids": ids}, "application/json")
        assert answer.status_code == 200, answer.content
        assert [t["thread_id"] for t in answer.json()] == ["kept"]
        return len(seen)

    few = queries(["kept", *(f"none-{i}" for i in range(9))])
    assert queries(["kept", *(f"none-{i}" for i in range(IDS_MAX - 1))]) == few


def test_prune_names_at_most_its_bound(lg):
    lg.run_graph("kept")
    who = lg.owner()
    named = ["kept", *(f"none-{i}" for i in range(PRUNE_MAX))]
    refused(call(lg, who, "POST", "/threads/prune", {"thread_ids": named}), "thread_ids")
    assert (
        str(PRUNE_MAX)
        in call(lg, who, "POST", "/threads/prune", {"thread_ids": named}).json()["detail"]
    )
    assert call(lg, who, "GET", "/threads/kept").status_code == 200
    refused(call(lg, who, "POST", "/threads/prune", {"thread_ids": ["\x00"]}), "thread_ids[0]")


# --- throttles ----------------------------------------------------------------------------

RATES = {
    "checkpoints.delete": "3/min",
    "checkpoints.fork": "2/min",
    "checkpoints.bulk_update": "2/min",
}


@pytest.fixture
def rated(settings):
    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": RATES}
    yield
    cache.clear()


def test_deletes_share_the_rest_apis_throttle(lg, rated):
    who = lg.owner()
    for i in range(6):
        lg.run_graph(f"d-{i}")
    for i in range(3):
        assert call(lg, who, "DELETE", f"/threads/d-{i}").status_code == 204
    limited = call(lg, who, "DELETE", "/threads/d-3")
    assert limited.status_code == 429, limited.text
    assert 0 < int(limited.headers["Retry-After"]) <= 60
    assert call(lg, who, "GET", "/threads/d-3").status_code == 200
    # The same count per user as the REST API's delete: one bucket, whichever route.
    rest = httpx.delete(
        f"{lg.url.removesuffix('/langgraph')}/api/threads/d-4/",
        headers={"Authorization": f"Token {lg.tokens[who]}"},
    )
    assert rest.status_code == 429, rest.text
    # Reads and metadata changes are not deletes.
    for _ in range(4):
        assert call(lg, who, "PATCH", "/threads/d-5", {"metadata": {"k": 1}}).status_code == 200
        assert call(lg, who, "POST", "/threads/search", {}).status_code == 200
    # Another user has a count of their own (on redis the owner is staff already).
    other = "staff" if lg.isolates else "alice"
    assert call(lg, other, "DELETE", "/threads/d-5").status_code == (204 if lg.isolates else 404)


def test_prune_counts_each_thread_as_a_delete(lg, rated):
    who = lg.owner()
    for i in range(4):
        lg.run_graph(f"p-{i}")
    pruned = call(lg, who, "POST", "/threads/prune", {"thread_ids": ["p-0", "p-1", "p-0"]})
    assert pruned.json() == {"pruned_count": 2}
    limited = call(lg, who, "POST", "/threads/prune", {"thread_ids": ["p-2", "p-3"]})
    assert limited.status_code == 429, limited.text
    assert call(lg, who, "GET", "/threads/p-2").status_code == 200
    assert call(lg, who, "POST", "/threads/prune", {"thread_ids": ["p-2"]}).status_code == 200
    assert call(lg, who, "DELETE", "/threads/p-3").status_code == 429


def test_copy_and_update_state_share_fork_and_bulk_update_throttles(lg, rated):
    who = lg.owner()
    lg.run_graph("src")
    for _ in range(2):
        assert call(lg, who, "POST", "/threads/src/copy").status_code == 200
    assert call(lg, who, "POST", "/threads/src/copy").status_code == 429
    update = {"values": {"notes": ["x"]}, "as_node": "write"}
    for _ in range(2):
        assert call(lg, who, "POST", "/threads/src/state", update).status_code == 200
    assert call(lg, who, "POST", "/threads/src/state", update).status_code == 429
    # Reading a state by posting its checkpoint is a read.
    for _ in range(3):
        assert call(lg, who, "POST", "/threads/src/state/checkpoint", {}).status_code == 200


def test_the_service_rates_every_destructive_langgraph_route():
    from project import settings as service

    rates = service.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    scopes = {
        views.ThreadView.throttle_scopes["DELETE"],
        views.StateView.throttle_scopes["POST"],
        views.CopyView.throttle_scope,
        views.PruneView.throttle_scope,
    }
    assert scopes == {"checkpoints.delete", "checkpoints.bulk_update", "checkpoints.fork"}
    assert all(rates[scope] for scope in scopes)


# --- owners and the store's own metadata keys ------------------------------------------


def test_store_keys_in_client_metadata_are_refused(lg):
    who = lg.owner()
    assert call(lg, who, "POST", "/threads", {"thread_id": "mine"}).status_code == 200
    alice = lg.users["alice"].pk
    for key in STORE_METADATA_KEYS:
        planted = {key: alice if key == "user_id" else {"level": "sync"}}
        made = call(lg, who, "POST", "/threads", {"thread_id": f"t-{key}", "metadata": planted})
        refused(made, f"metadata.{key}", key)
        assert call(lg, who, "GET", f"/threads/t-{key}").status_code == 404
        patched = call(lg, who, "PATCH", "/threads/mine", {"metadata": planted})
        refused(patched, f"metadata.{key}", key)
    # A NUL some stores strip from keys does not smuggle one in.
    hidden = call(lg, who, "POST", "/threads", {"metadata": {"user_id\x00": alice}})
    refused(hidden, "metadata.user_id")
    assert call(lg, who, "GET", "/threads/mine").json()["metadata"] == {}


def test_langgraph_keys_in_client_metadata_pass_as_data(lg):
    who = lg.owner()
    metadata = {
        "run_id": "run-7",
        "source": "input",
        "step": -1,
        "parents": {},
        "writes": None,
        "thread_id": "elsewhere",
        "graph_id": "agent",
    }
    made = call(lg, who, "POST", "/threads", {"thread_id": "lg-keys", "metadata": metadata})
    assert made.status_code == 200, made.text
    assert made.json()["metadata"] == metadata
    patched = call(lg, who, "PATCH", "/threads/lg-keys", {"metadata": {"step": 3}})
    assert patched.json()["metadata"]["step"] == 3


def test_a_thread_made_over_http_is_its_makers_alone(lg):
    """bob's thread is bob's: no metadata names another owner, in its record or its
    stored checkpoint."""
    if not lg.isolates:
        # Only staff make threads where the store records no owners.
        assert call(lg, "bob", "POST", "/threads", {"thread_id": "b"}).status_code == 403
        return
    alice = lg.users["alice"].pk
    planted = call(
        lg, "bob", "POST", "/threads", {"thread_id": "b", "metadata": {"user_id": alice}}
    )
    refused(planted, "metadata.user_id")
    made = call(lg, "bob", "POST", "/threads", {"thread_id": "b", "metadata": {"team": "x"}})
    assert made.status_code == 200, made.text
    assert call(lg, "alice", "GET", "/threads/b").status_code == 404
    assert call(lg, "alice", "POST", "/threads/count", {}).json() == 0
    assert call(lg, "bob", "GET", "/threads/b").status_code == 200
    head = get_saver().get_tuple({"configurable": {"thread_id": "b", "checkpoint_ns": ""}})
    assert "user_id" not in head.metadata and head.metadata["team"] == "x"
    copied = call(lg, "bob", "POST", "/threads/b/copy").json()
    assert call(lg, "alice", "GET", f"/threads/{copied['thread_id']}").status_code == 404


@pytest.mark.parametrize(
    "metadata",
    [{"k": "a\x00b"}, {"k\x00": 1}, {"k": ["\ud800"]}, {"\udfff": 1}, {"k": {"deep": "\x00"}}],
)
def test_text_no_store_or_answer_can_hold_is_refused_in_metadata(lg, metadata):
    who = lg.owner()
    made = call(lg, who, "POST", "/threads", {"thread_id": "odd", "metadata": metadata})
    assert made.status_code == 422, made.text
    assert made.json()["field"].startswith("metadata")
    assert call(lg, who, "GET", "/threads/odd").status_code == 404
    call(lg, who, "POST", "/threads", {"thread_id": "plain"})
    patched = call(lg, who, "PATCH", "/threads/plain", {"metadata": metadata})
    assert patched.status_code == 422, patched.text
    assert call(lg, who, "GET", "/threads/plain").json()["metadata"] == {}


# --- an unreadable thread in a search ---------------------------------------------------


def test_one_unreadable_thread_never_fails_a_search(lg):
    lg.run_graph("good", owner="staff")
    lg.run_graph("bad", owner="staff")
    corrupt_values(get_saver(), "bad", PICKLED)
    assert call(lg, "staff", "GET", "/threads/bad").status_code == 409  # read alone: why
    found = call(lg, "staff", "POST", "/threads/search", {})
    assert found.status_code == 200, found.text
    by_id = {t["thread_id"]: t for t in found.json()}
    assert by_id["good"]["values"]["approved"] is True and "error" not in by_id["good"]
    bad = by_id["bad"]
    assert bad["status"] == "error" and bad["values"] is None and bad["interrupts"] == {}
    assert bad["error"]["code"] == "codec_error" and "'bad'" in bad["error"]["detail"]
    assert call(lg, "staff", "POST", "/threads/count", {}).json() == 2
    by_value = call(lg, "staff", "POST", "/threads/search", {"values": {"approved": True}})
    assert [t["thread_id"] for t in by_value.json()] == ["good"]
    errors = call(lg, "staff", "POST", "/threads/search", {"status": "error", "select": ["status"]})
    assert [t["status"] for t in errors.json()] == ["error"]
    assert errors.json()[0]["error"]["code"] == "codec_error"
    ordered = call(
        lg, "staff", "POST", "/threads/search", {"sort_by": "status", "ids": ["good", "bad"]}
    )
    assert [t["thread_id"] for t in ordered.json()] == ["good", "bad"]
    # The REST API's list reads no values: it answers too.
    listed = httpx.get(
        f"{lg.url.removesuffix('/langgraph')}/api/threads/",
        headers={"Authorization": f"Token {lg.tokens['staff']}"},
    )
    assert listed.status_code == 200, listed.text
    assert {t["thread_id"] for t in listed.json()["results"]} == {"good", "bad"}


# --- reducer refusals -------------------------------------------------------------------


@pytest.mark.parametrize("notes", ["not a list", 5, {"a": 1}])
def test_a_value_a_reducer_cannot_take_is_a_422_naming_the_channel(lg, notes):
    who = lg.owner()
    lg.run_graph("r-1")
    before = call(lg, who, "GET", "/threads/r-1/state").json()
    update = call(lg, who, "POST", "/threads/r-1/state", {"values": {"notes": notes}})
    refused(update, "values.notes", "'notes'")
    assert call(lg, who, "GET", "/threads/r-1/state").json() == before
    steps = [{"updates": [{"values": {"topic": "x", "notes": notes}, "as_node": "plan"}]}]
    made = call(lg, who, "POST", "/threads", {"thread_id": "r-2", "supersteps": steps})
    refused(made, "values.notes", "'notes'")
    assert call(lg, who, "GET", "/threads/r-2").status_code == 404


def test_input_an_error_quotes_never_breaks_the_answer(lg):
    """A lone surrogate LangGraph quotes in its refusal (an unknown node, a subgraph) comes
    back escaped in a 422, not as a 500 from the JSON renderer."""
    who = lg.owner()
    lg.run_graph("q-1")
    node = call(lg, who, "POST", "/threads/q-1/state", {"values": {}, "as_node": "\ud800"})
    assert node.status_code == 422, node.text
    assert "\\ud800" in node.json()["detail"]
    namespace = call(
        lg, who, "POST", "/threads/q-1/state", {"checkpoint": {"checkpoint_ns": "\ud800"}}
    )
    refused(namespace, "checkpoint.checkpoint_ns", "surrogate")
    steps = [{"updates": [{"values": {"topic": "x"}, "as_node": "\ud800"}]}]
    made = call(lg, who, "POST", "/threads", {"thread_id": "q-2", "supersteps": steps})
    assert made.status_code == 422, made.text
    assert call(lg, who, "GET", "/threads/q-2").status_code == 404
