"""A 10,000-message thread in the API: state pages its messages; history values on request."""

from __future__ import annotations

import pytest

from checkpoints.models import Thread
from checkpoints.store.registry import get_saver
from tests.admin_fixtures import PAGE, TOTAL, long_thread

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

STATE = "/api/threads/big/state/"
HISTORY = "/api/threads/big/history/"


@pytest.fixture
def big(users):
    long_thread(get_saver(), "big")
    Thread.objects.filter(thread_id="big").update(owner=users["alice"])


def contents(values: dict) -> list[str]:
    return [m["kwargs"]["content"] for m in values["messages"]]


def test_state_shows_the_last_messages_and_the_total(clients, big):
    body = clients["alice"].get(STATE).json()
    assert contents(body["values"]) == [f"said #{i}." for i in range(TOTAL - PAGE, TOTAL)]
    assert body["values"]["turn"] == 2
    assert body["message_pages"] == {
        "messages": {"total": TOTAL, "start": TOTAL - PAGE, "end": TOTAL, "next_before": 9950}
    }


def test_state_pages_back_to_the_first_message(clients, big):
    older = clients["alice"].get(STATE, {"messages_before": TOTAL - PAGE}).json()
    assert contents(older["values"])[0] == f"said #{TOTAL - 2 * PAGE}."
    assert older["message_pages"]["messages"]["next_before"] == TOTAL - 2 * PAGE
    first = clients["alice"].get(STATE, {"messages_before": 20}).json()
    assert contents(first["values"]) == [f"said #{i}." for i in range(20)]
    assert first["message_pages"]["messages"] == {
        "total": TOTAL,
        "start": 0,
        "end": 20,
        "next_before": None,
    }


@pytest.mark.parametrize("bad", ["-1", "x", "1e3"])
def test_a_bad_messages_before_is_a_400_naming_it(clients, big, bad):
    response = clients["alice"].get(STATE, {"messages_before": bad})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == "messages_before"


def test_history_leaves_values_out_unless_asked(clients, big):
    items = clients["alice"].get(HISTORY, {"limit": 3}).json()["results"]
    assert len(items) == 3
    for item in items:
        assert "values" not in item and "message_pages" not in item
        assert {"metadata", "config", "next", "interrupts"} <= set(item)
    steps = [item["metadata"]["step"] for item in items]
    assert steps == [2, 1, 0]


def test_history_with_select_values_carries_them_paged(clients, big):
    items = clients["alice"].get(HISTORY, {"limit": 2, "select": "values"}).json()["results"]
    assert [set(item) for item in items] == [{"values", "message_pages"}] * 2
    assert contents(items[0]["values"])[-1] == f"said #{TOTAL - 1}."
    assert len(items[0]["values"]["messages"]) == PAGE
    assert items[0]["message_pages"]["messages"]["total"] == TOTAL
    assert items[1]["message_pages"]["messages"]["total"] == TOTAL - 1


def test_history_select_names_the_fields_returned(clients, big):
    items = clients["alice"].get(HISTORY, {"limit": 1, "select": "metadata,next"}).json()
    assert set(items["results"][0]) == {"metadata", "next"}
    assert items["next_before"] is not None


@pytest.mark.parametrize("bad", ["values,nope", ",", "values,,metadata"])
def test_an_unknown_select_name_is_a_400_naming_it(clients, big, bad):
    response = clients["alice"].get(HISTORY, {"select": bad})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["field"] == "select"
    assert "select" in error["message"]


def test_the_schema_documents_select_and_messages_before(clients, big):
    schema = clients["staff"].get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = {
        op["operationId"]: op
        for item in schema["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    history = {p["name"]: p for p in operations["threads_history"]["parameters"]}
    assert "values" in history["select"]["description"]
    state = {p["name"]: p for p in operations["threads_state"]["parameters"]}
    assert state["messages_before"]["schema"]["type"] == "integer"
