"""One job's import reads a LangGraph table source ahead, in a thread of its own, while it
writes: the threads arrive in order, whole, with a reader's error where it happened, and an
import that stops early stops its reader."""

from __future__ import annotations

import threading
import time

import pytest

from checkpoints.transfer import SaverSource, copy_threads, verify_thread
from checkpoints.transfer.copy import READ_AHEAD, read_ahead
from checkpoints.transfer.langgraph_tables import sqlite_tables
from tests.checkpoints.transfer.graphs import THREADS, copy_rows, seed


class SourceDied(Exception):
    pass


def test_items_arrive_in_order_read_by_another_thread():
    readers = []

    def read(ids):
        for i in ids:
            readers.append(threading.current_thread().name)
            yield i * 10

    assert list(read_ahead(read, list(range(50)))) == [i * 10 for i in range(50)]
    assert set(readers) == {"import-read-ahead"}
    assert not any(t.name == "import-read-ahead" for t in threading.enumerate())


def test_a_readers_error_arrives_after_what_it_read_first():
    def read(ids):
        yield from ids[:3]
        raise SourceDied("the source's server went away after three threads")

    got = []
    with pytest.raises(SourceDied, match="after three threads"):
        for item in read_ahead(read, ["a", "b", "c", "d"]):
            got.append(item)
    assert got == ["a", "b", "c"]


def test_a_caller_that_stops_early_stops_the_reader():
    read_up_to = []
    closed = threading.Event()

    def read(ids):
        try:
            for i in ids:
                read_up_to.append(i)
                yield i
        finally:
            closed.set()

    items = read_ahead(read, list(range(10_000)))
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    time.sleep(0.2)  # the reader fills its queue, then waits
    items.close()
    assert closed.wait(5), "the reader's source was left open"
    # It stopped at the queue's bound: the three taken, READ_AHEAD ready, one in hand.
    assert len(read_up_to) <= 3 + READ_AHEAD + 2
    assert not any(t.name == "import-read-ahead" for t in threading.enumerate())


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
def test_an_import_from_langgraph_tables_reads_ahead_and_leaves_each_thread_as_read(
    lg_sqlite, store
):
    seed(lg_sqlite)
    counts = copy_rows(lg_sqlite, 5)
    alive_while_writing = []

    def progress(summary):
        alive_while_writing.append(
            any(t.name == "import-read-ahead" for t in threading.enumerate())
        )

    with sqlite_tables(lg_sqlite.path, "SqliteSaver") as source:
        summary = copy_threads(source, store, progress=progress)
        assert (summary.threads, summary.checkpoints) == (len(counts), sum(counts.values()))
        assert summary.refused == 0
        # The writes ran beside a live reader (not after reading everything first).
        assert any(alive_while_writing)
        ours = SaverSource(store)
        for thread_id in counts:
            verify_thread(source.thread(thread_id), ours.thread(thread_id))
    assert len(counts) == len(THREADS) + 5 * (len(THREADS) - 1)


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
def test_a_read_ahead_prepares_each_threads_batch_and_its_bytes_count_once(
    lg_sqlite, store, monkeypatch
):
    seed(lg_sqlite)
    counts = copy_rows(lg_sqlite, 2)
    stored_by = []
    put_prepared = type(store).put_prepared

    def spy(saver, batch):
        stored_by.append(threading.current_thread().name)
        return put_prepared(saver, batch)

    # On the class: the import writes through a copy of the store (counting its bytes).
    # The store still writes each batch; this only watches.
    monkeypatch.setattr(type(store), "put_prepared", spy)
    with sqlite_tables(lg_sqlite.path, "SqliteSaver") as source:
        ahead = copy_threads(source, store)
        ours = SaverSource(store)
        for thread_id in counts:
            verify_thread(source.thread(thread_id), ours.thread(thread_id))
        # Every thread went in as its batch prepared by the reader, sent by this thread.
        assert stored_by == [threading.current_thread().name] * len(counts)
        store.delete_threads(list(counts))
        # verify reads the source again from this thread: no read-ahead, nothing prepared.
        alone = copy_threads(source, store, verify=True)
    assert len(stored_by) == len(counts)
    assert (alone.threads, alone.checkpoints) == (ahead.threads, ahead.checkpoints)
    assert ahead.bytes == alone.bytes > 0
