"""Checkpoints written before LangGraph's format 4 (v2, v3), whose pending sends live in the
parent's writes (issue 56): read in the same statement as the checkpoint on PostgreSQL and
SQLite, and equal to what LangGraph's own savers give on the same data.

The database stores apply PostgresSaver's rule (the TASKS channel holds the parent's
sends), so PostgresSaver is their reference; memory and Redis read as InMemorySaver does
(no sends moved), so InMemorySaver is theirs. Beside the saver's tuples, LangGraph's own
``get_state`` over each saver must agree (the sends become the next tasks).
"""

from __future__ import annotations

import operator
import os
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Send

from checkpoints.channels import TASKS
from tests.services import throwaway_postgres_database

# Fixed ids and versions, so ours and the peer hold byte-for-byte the same checkpoints.
PARENT_ID = "1ef4f797-8335-6428-8001-8a1503f9b875"
CHILD_ID = "1ef4f797-8335-6428-8002-8a1503f9b875"
GRANDCHILD_ID = "1ef4f797-8335-6428-8003-8a1503f9b875"
V1, V2, V3 = (f"{n:032}.0" for n in (1, 2, 3))


class State(TypedDict):
    items: Annotated[list, operator.add]


def _graph(saver):
    """The graph the legacy thread was written by: START sends to "worker"."""
    builder = StateGraph(State)
    builder.add_node("worker", lambda state: {"items": ["w"]})
    builder.add_conditional_edges(
        START, lambda state: [Send("worker", {"items": ["s"]})], ["worker"]
    )
    return builder.compile(checkpointer=saver)


def _checkpoint(v: int, checkpoint_id: str, items: list, version: str) -> dict:
    checkpoint = empty_checkpoint()
    checkpoint["v"] = v
    checkpoint["id"] = checkpoint_id
    checkpoint["ts"] = "2024-07-31T20:14:19.804150+00:00"
    checkpoint["channel_values"] = {"items": items}
    checkpoint["channel_versions"] = {"items": version}
    return checkpoint


def write_legacy(saver, thread_id: str, v: int) -> dict:
    """A parent, a child and a grandchild, all format ``v``; the parent's and the child's
    tasks sent (TASKS writes, over two tasks, out of path order) and wrote a value."""
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    meta = {"source": "loop", "parents": {}}
    parent = saver.put(
        root, _checkpoint(v, PARENT_ID, ["a"], V1), {**meta, "step": 0}, {"items": V1}
    )
    saver.put_writes(parent, [(TASKS, Send("worker", {"items": ["2"]}))], "task-b", "~b")
    saver.put_writes(
        parent,
        [(TASKS, Send("worker", {"items": ["1"]})), ("items", ["x"])],
        "task-a",
        "~a",
    )
    child = saver.put(
        parent, _checkpoint(v, CHILD_ID, ["a", "b"], V2), {**meta, "step": 1}, {"items": V2}
    )
    saver.put_writes(child, [(TASKS, Send("worker", {"items": ["3"]}))], "task-c", "~c")
    saver.put(child, _checkpoint(v, GRANDCHILD_ID, ["a", "b", "c"], V3), {**meta, "step": 2}, {})
    return root


def _shape(tup) -> tuple | None:
    if tup is None:
        return None
    checkpoint = tup.checkpoint
    return (
        tup.config["configurable"],
        tup.parent_config["configurable"] if tup.parent_config else None,
        checkpoint["v"],
        checkpoint["id"],
        checkpoint["channel_values"],
        checkpoint["channel_versions"],
        tup.metadata.get("step"),
        sorted(tup.pending_writes, key=repr),
    )


def _snapshot(graph, config) -> tuple:
    snap = graph.get_state(config)
    return (
        snap.values,
        snap.next,
        [(t.id, t.name, t.path) for t in snap.tasks],
        snap.config["configurable"],
    )


@pytest.fixture(scope="module")
def lg_postgres_url():
    with throwaway_postgres_database(f"lg_legacy_{os.getpid()}") as url:
        yield url


@pytest.fixture
def reference(provider, request):
    """The peer whose reading ours must equal, holding nothing yet."""
    if provider not in ("postgres", "sqlite"):
        yield InMemorySaver()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(request.getfixturevalue("lg_postgres_url")) as saver:
        saver.setup()
        saver.conn.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
        yield saver


@pytest.mark.parametrize("provider", ["postgres", "sqlite", "memory", "redis"])
@pytest.mark.parametrize("v", [2, 3])
def test_legacy_reads_equal_the_peers(store, reference, provider, v):
    ours_root, theirs_root = write_legacy(store, "legacy", v), write_legacy(reference, "legacy", v)
    for checkpoint_id in (None, PARENT_ID, CHILD_ID, GRANDCHILD_ID):
        config = {"configurable": {**ours_root["configurable"]}}
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        assert _shape(store.get_tuple(config)) == _shape(reference.get_tuple(config))
    ours = [_shape(t) for t in store.list(ours_root)]
    assert ours == [_shape(t) for t in reference.list(theirs_root)]
    assert [_shape(t) for t in store.list(ours_root, limit=2)] == ours[:2]
    assert [
        _shape(t)
        for t in store.list(
            None,
            before={"configurable": {**ours_root["configurable"], "checkpoint_id": GRANDCHILD_ID}},
        )
    ] == ours[1:]
    # The database stores move the sends, in task path order; memory and Redis do not.
    newest = store.get_tuple(ours_root).checkpoint
    if provider in ("postgres", "sqlite"):
        assert newest["channel_values"][TASKS] == [Send("worker", {"items": ["3"]})]
        assert newest["channel_versions"][TASKS] == V3  # the newest of its versions
        child = store.get_tuple(
            {"configurable": {**ours_root["configurable"], "checkpoint_id": CHILD_ID}}
        )
        assert child.checkpoint["channel_values"][TASKS] == [
            Send("worker", {"items": ["1"]}),
            Send("worker", {"items": ["2"]}),
        ]
    else:
        assert TASKS not in newest["channel_values"]
    # LangGraph's own reading of the thread: the sends are the next tasks.
    snapshot = _snapshot(_graph(store), ours_root)
    assert snapshot == _snapshot(_graph(reference), theirs_root)
    assert snapshot[1] == (("worker",) if provider in ("postgres", "sqlite") else ())
    at_child = {"configurable": {**ours_root["configurable"], "checkpoint_id": CHILD_ID}}
    assert _snapshot(_graph(store), at_child) == _snapshot(_graph(reference), at_child)


@pytest.mark.parametrize("provider", ["postgres", "sqlite", "memory", "redis"])
@pytest.mark.asyncio
async def test_legacy_reads_async_equal_sync(store, provider):
    from asgiref.sync import sync_to_async

    root = await sync_to_async(write_legacy)(store, "legacy-async", 3)
    synced = await sync_to_async(lambda: [_shape(t) for t in store.list(root)])()
    assert [_shape(t) async for t in store.alist(root)] == synced
    assert _shape(await store.aget_tuple(root)) == synced[0]


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
def test_a_legacy_get_is_one_statement(store, provider):
    """The checkpoint, its blobs, its writes and its parent's sends: one statement (before,
    a second query for the sends)."""
    from django.db import connections

    root = write_legacy(store, "legacy-one", 3)
    alias = store.using
    connection = connections[alias]
    statements: list[str] = []
    if provider == "sqlite":
        # The saver's statements go to sqlite3 directly: its trace callback sees them all.
        connection.ensure_connection()
        connection.connection.set_trace_callback(statements.append)
        try:
            tup = store.get_tuple(root)
        finally:
            connection.connection.set_trace_callback(None)
    else:
        import psycopg

        from checkpoints.store.postgres import sql as pgwire

        # Both ways a statement leaves: psycopg's cursor, and libpq directly (`sql.run`).
        seen = []
        real_execute, real_run = psycopg.Cursor.execute, pgwire.run

        def execute(self, query, *args, **kwargs):
            seen.append(str(query))
            return real_execute(self, query, *args, **kwargs)

        def run(conn, statement, *args, **kwargs):
            seen.append(statement.sql)
            return real_run(conn, statement, *args, **kwargs)

        psycopg.Cursor.execute, pgwire.run = execute, run
        try:
            tup = store.get_tuple(root)
        finally:
            psycopg.Cursor.execute, pgwire.run = real_execute, real_run
        statements = seen
    reads = [s for s in statements if "SELECT" in s.upper()]
    assert len(reads) == 1, reads
    assert tup.checkpoint["channel_values"][TASKS] == [Send("worker", {"items": ["3"]})]


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
def test_sealed_legacy_sends_are_opened_at_the_parents_place(store, provider):
    """With encryption at rest each send was sealed where it was written, the parent's
    writes; the reader opens it there (a write sealed elsewhere is refused by the codec's
    own tests)."""
    import base64

    from django.test import override_settings

    from checkpoints.conf import store_settings

    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    sealed = {**store_settings(), "ENCRYPTION_KEYS": [key]}
    with override_settings(CHECKPOINTS=sealed):
        root = write_legacy(store, "legacy-sealed", 3)
        newest = store.get_tuple(root).checkpoint
        listed = [t.checkpoint for t in store.list(root)]
    assert newest["channel_values"][TASKS] == [Send("worker", {"items": ["3"]})]
    assert listed[1]["channel_values"][TASKS] == [
        Send("worker", {"items": ["1"]}),
        Send("worker", {"items": ["2"]}),
    ]
