"""Rollback and fork with ``expected_head``: a graph's own turn moves the head without
touching the version If-Match guards, and the head the caller read refuses it."""

from __future__ import annotations

import pytest

from checkpoints.store.registry import get_saver
from tests.api_fixtures import assert_error, build_demo_graph, url

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def head_id(client, thread_id: str) -> str:
    response = client.get(url(thread_id, "state"))
    assert response.status_code == 200, response.content
    return response.json()["config"]["configurable"]["checkpoint_id"]


def first_id(client, thread_id: str) -> str:
    response = client.get(url(thread_id, "history"), {"limit": 100})
    return response.json()["results"][-1]["config"]["configurable"]["checkpoint_id"]


def another_turn(thread_id: str) -> None:
    """The agent writes a turn: a real run of the demo graph on the same thread."""
    build_demo_graph(get_saver()).invoke(
        {"topic": "again"}, {"configurable": {"thread_id": thread_id}}
    )


def test_a_graph_turn_after_the_read_refuses_the_rollback(clients, threads):
    alice = clients["alice"]
    seen = head_id(alice, "alice-1")
    target = first_id(alice, "alice-1")
    version = alice.get(url("alice-1")).json()["version"]
    another_turn("alice-1")
    moved = head_id(alice, "alice-1")
    assert moved != seen
    # The version did not move: If-Match alone lets this rollback through.
    assert alice.get(url("alice-1")).json()["version"] == version
    stale = alice.post(
        url("alice-1", "rollback"),
        {"checkpoint_id": target, "expected_head": seen},
        format="json",
        HTTP_IF_MATCH=f'"{version}"',
    )
    assert_error(stale, 409, "version_conflict", field="expected_head")
    message = stale.json()["error"]["message"]
    assert seen in message and moved in message
    assert head_id(alice, "alice-1") == moved
    done = alice.post(
        url("alice-1", "rollback"),
        {"checkpoint_id": target, "expected_head": moved},
        format="json",
    )
    assert done.status_code == 200, done.content
    assert done.json()["metadata"]["rollback"]["target"] == target


def test_a_fork_checks_the_head_it_was_shown(clients, threads):
    alice = clients["alice"]
    seen = head_id(alice, "alice-1")
    another_turn("alice-1")
    stale = alice.post(
        url("alice-1", "fork"),
        {"checkpoint_id": seen, "expected_head": seen, "new_thread_id": "copy-1"},
        format="json",
    )
    assert_error(stale, 409, "version_conflict", field="expected_head")
    assert alice.get(url("copy-1")).status_code == 404
    ok = alice.post(
        url("alice-1", "fork"),
        {"checkpoint_id": seen, "expected_head": head_id(alice, "alice-1")},
        format="json",
    )
    assert ok.status_code == 201, ok.content


@pytest.mark.parametrize("bad", ["", "x" * 1025, "a\x00b", ["x"]])
def test_a_bad_expected_head_is_400_naming_it(clients, threads, bad):
    alice = clients["alice"]
    before = head_id(alice, "alice-1")
    response = alice.post(
        url("alice-1", "rollback"),
        {"checkpoint_id": first_id(alice, "alice-1"), "expected_head": bad},
        format="json",
    )
    assert_error(response, 400, field="expected_head")
    assert head_id(alice, "alice-1") == before


@pytest.mark.parametrize("never", [" ", "abc\x07def", "Ê\x9ba"])
def test_a_schema_valid_head_no_checkpoint_has_is_a_409(clients, threads, never):
    """The schema admits any string without NUL up to 1024 characters (schemathesis sends
    such); one that names no head is the head having moved, never a 400."""
    alice = clients["alice"]
    before = head_id(alice, "alice-1")
    response = alice.post(
        url("alice-1", "rollback"),
        {"checkpoint_id": first_id(alice, "alice-1"), "expected_head": never},
        format="json",
    )
    assert_error(response, 409, "version_conflict", field="expected_head")
    assert head_id(alice, "alice-1") == before
