"""The SQLite saver's connections: lent to threads without one, one writer at a time."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from django.db.backends.signals import connection_created
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from tests.checkpoints.store.graphs import linear_graph
from tests.store_helpers import config_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def saver():
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.registry import get_saver

    forget_format_checks()
    return get_saver("sqlite", using="default")


@pytest.fixture
def opened():
    """How many new connections to "default" were opened while the test ran."""
    count = []

    def seen(sender, connection, **kwargs):
        if connection.alias == "default":
            count.append(1)

    connection_created.connect(seen)
    yield count
    connection_created.disconnect(seen)


def _put(saver, thread_id: str, step: int, parent: str | None = None) -> dict:
    checkpoint = create_checkpoint(empty_checkpoint(), None, step)
    config = config_for(thread_id, parent, ns="")
    return saver.put(config, checkpoint, {"source": "loop", "step": step}, {})


def test_graph_runs_borrow_open_connections_instead_of_opening_new_ones(saver, opened):
    graph = linear_graph(saver)
    graph.invoke({"log": []}, config_for("warm"))
    opened.clear()
    for i in range(6):
        out = graph.invoke({"log": []}, config_for(f"run-{i}"))
        assert out["log"] == ["a", "b"]
    # LangGraph makes new worker threads for every invocation; each used to open (and
    # leak) a connection of its own, two or three an invocation.
    assert len(opened) < 3
    assert saver.get_tuple(config_for("run-5")).checkpoint["channel_values"]["log"] == ["a", "b"]


def test_a_thread_without_a_connection_leaves_none_behind(saver):
    left = {}

    def work():
        stored = _put(saver, "lent", 0)
        saver.put_writes(stored, [("log", "x")], "task-1")
        left["connection"] = getattr(connections._connections, "default", None)
        left["read"] = saver.get_tuple(config_for("lent"))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert left["connection"] is None
    assert left["read"].pending_writes == [("task-1", "log", "x")]
    assert saver.get_tuple(config_for("lent")).pending_writes == [("task-1", "log", "x")]


def test_writers_in_many_threads_all_land(saver):
    errors = []

    def writer(n: int) -> None:
        try:
            stored = None
            for step in range(15):
                parent = stored["configurable"]["checkpoint_id"] if stored else None
                stored = _put(saver, f"w{n}", step, parent)
                saver.put_writes(stored, [("log", step)], f"task-{step}")
        except Exception as exc:  # noqa: BLE001 - reported below with the thread's number
            errors.append((n, exc))

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    for n in range(6):
        found = list(saver.list(config_for(f"w{n}")))
        assert len(found) == 15
        assert found[0].metadata["step"] == 14
        assert found[0].pending_writes == [("task-14", "log", 14)]


def test_a_put_inside_the_callers_transaction_rolls_back_with_it(saver):
    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        stored = _put(saver, "undone", 0)
        saver.put_writes(stored, [("log", "x")], "task-1")
        assert saver.get_tuple(config_for("undone")) is not None
        raise Undo
    assert saver.get_tuple(config_for("undone")) is None
    assert saver.thread_holdings("undone").empty


def test_writes_before_the_first_checkpoint_make_the_thread_in_their_transaction(saver):
    """LangGraph may store a run's input writes before the thread's first checkpoint: the
    writes' own transaction makes the thread row (no ORM detour), and writing the same
    slots again keeps the first values."""
    from django.test.utils import CaptureQueriesContext

    first = empty_checkpoint()
    config = config_for("fresh", first["id"], ns="")
    with CaptureQueriesContext(connections["default"]) as orm:
        saver.put_writes(config, [("messages", "hello"), ("route", "start")], "input-task")
        saver.put_writes(config, [("messages", "other"), ("route", "other")], "input-task")
    assert not orm.captured_queries
    assert saver.thread_holdings("fresh").writes == 2
    saver.put(config_for("fresh"), first, {"source": "input", "step": -1}, {})
    assert saver.get_tuple(config).pending_writes == [
        ("input-task", "messages", "hello"),
        ("input-task", "route", "start"),
    ]


def test_a_new_file_switches_to_wal_once_another_writer_lets_go(tmp_path):
    """SQLite refuses the switch to WAL at once ("database is locked", no busy wait) while
    another connection writes to a file still in rollback-journal mode: four scripts
    starting together on a new file failed so. The connection waits for the writer."""
    import sqlite3
    import time

    from django.db.backends.sqlite3.base import DatabaseWrapper

    path = tmp_path / "new.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    releaser = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    releaser.start()
    settings_dict = {**connections["default"].settings_dict, "NAME": str(path), "OPTIONS": {}}
    wrapper = DatabaseWrapper(settings_dict, alias="new-file")
    started = time.monotonic()
    try:
        with wrapper.cursor() as cursor:  # connection_created runs the app's tuning
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
            cursor.execute("SELECT count(*) FROM t")
            assert cursor.fetchone()[0] == 1
    finally:
        wrapper.close()
        releaser.join()
        writer.close()
    assert time.monotonic() - started >= 0.25  # it waited for the writer, then switched


def test_a_loan_closed_on_another_thread_leaves_that_threads_connection_alone(saver):
    """A generator holding a lent connection may be finalized by the garbage collector on
    any thread; closing it there used to put the lender's connection into that thread's
    slot, so its next query failed ("created in a thread can only be used in that same
    thread")."""
    from checkpoints.store.sqlite.connection import warm_connection

    for i in range(3):
        _put(saver, f"loan-{i}", 0)

    def reading():
        with warm_connection("default"):
            yield connections["default"]

    lent = reading()
    outcome: list = []

    borrowed, finished = threading.Event(), threading.Event()

    def lender():
        # A thread whose own connection is not open (so it borrows one), as LangGraph's
        # worker threads are after their first call; alive until the other one is done.
        connections["default"]
        outcome.append(next(lent))
        borrowed.set()
        finished.wait(30)

    def elsewhere():
        try:
            own = getattr(connections._connections, "default", None)
            lent.close()  # the finalizer, run on this thread
            outcome.append(getattr(connections._connections, "default", None) is own)
            # This thread still queries, on a connection of its own.
            outcome.append(len(list(saver.list(config_for("loan-1")))))
        except Exception as exc:  # reported below, with the thread's own error
            outcome.append(exc)
        finally:
            connections.close_all()
            finished.set()

    first = threading.Thread(target=lender)
    first.start()
    assert borrowed.wait(30)
    second = threading.Thread(target=elsewhere)
    second.start()
    second.join(30)
    first.join(30)
    assert outcome[1:] == [True, 1], outcome


def test_a_list_stopped_early_lends_nothing_while_suspended(saver):
    from checkpoints.store.sqlite.connection import _IDLE

    for step in range(3):
        _put(saver, "early", step)
    before = getattr(connections._connections, "default", None)
    listing = saver.list(config_for("early"))
    next(listing)
    # Suspended between pages' tuples, the generator holds no loan in this thread's slot.
    assert getattr(connections._connections, "default", None) is before
    listing.close()
    assert all(w.connection is None or not w.in_atomic_block for ws in _IDLE.values() for w in ws)
