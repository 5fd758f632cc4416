"""put_many, the import's path: a thread's puts and writes as one unit, read back as if put
one by one, on every provider."""

from __future__ import annotations

import threading

import pytest
from django.db import connections
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpoints.errors import CheckpointCodecError, InvalidCheckpointInput
from tests.store_helpers import IN_PROCESS

_IDS = [str(uuid6(clock_seq=step)) for step in range(5)]


def _thread(thread_id: str, steps: int = 4):
    """(puts, writes) of a small thread: a root chain, a subgraph namespace, a 100 KB value,
    ordinary and special writes; the same checkpoint ids whatever the thread."""
    puts, writes = [], []
    parent = None
    big = "x" * 100_000
    for step in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = _IDS[step]
        checkpoint["channel_values"] = {"count": step, "big": big}
        version = f"{step + 1:032}.0"
        checkpoint["channel_versions"] = {"count": version, "big": "1".zfill(32) + ".0"}
        new_versions = {"count": version}
        if step == 0:
            new_versions["big"] = checkpoint["channel_versions"]["big"]
        conf = {"thread_id": thread_id, "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent
        metadata = {"source": "loop", "step": step, "writes": {"node": {"count": step}}}
        puts.append(({"configurable": conf}, checkpoint, metadata, new_versions))
        at = {"configurable": {**conf, "checkpoint_id": checkpoint["id"]}}
        writes.append((at, [("count", step + 1), ("note", f"n{step}")], f"task-{step}", "p"))
        writes.append((at, [("__interrupt__", f"ask {step}")], f"task-{step}", "p"))
        parent = checkpoint["id"]
    sub = empty_checkpoint()
    sub["id"] = _IDS[4]
    sub["channel_values"] = {"inner": "sub"}
    sub["channel_versions"] = {"inner": "1".zfill(32) + ".5"}
    puts.append(
        (
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": "node:abc"}},
            sub,
            {"source": "loop", "step": 0},
            {"inner": sub["channel_versions"]["inner"]},
        )
    )
    return puts, writes


def _read(saver, thread_id: str) -> list:
    out = []
    for ns in ("", "node:abc"):
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        for tup in saver.list(config):
            out.append(
                (
                    ns,
                    tup.config["configurable"]["checkpoint_id"],
                    tup.parent_config and tup.parent_config["configurable"]["checkpoint_id"],
                    tup.checkpoint["channel_values"],
                    tup.metadata,
                    sorted(tup.pending_writes, key=repr),
                )
            )
    return out


def _assert_stamped(store, puts) -> None:
    """Each put's checkpoint carries the durability level the store writes at."""
    for put in puts:
        config = {"configurable": {**put[0]["configurable"], "checkpoint_id": put[1]["id"]}}
        assert store.get_durability(config)["level"] == store.durability


# put_many is the in-process saver's batch primitive (one unit of work for a transfer);
# RemoteSaver does not offer it.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_put_many_reads_back_as_the_same_puts_one_by_one(store):
    puts, writes = _thread("batched")
    configs = store.put_many(puts, writes)
    assert [c["configurable"]["checkpoint_id"] for c in configs] == [p[1]["id"] for p in puts]
    one_by_one, single_writes = _thread("single")
    for put in one_by_one:
        store.put(*put)
    for write in single_writes:
        store.put_writes(*write)
    batched, single = _read(store, "batched"), _read(store, "single")
    assert len(batched) == 5 and batched == single
    _assert_stamped(store, puts)


# put_many is the in-process saver's batch primitive (one unit of work for a transfer);
# RemoteSaver does not offer it.
@pytest.mark.parametrize("provider", IN_PROCESS)
@pytest.mark.parametrize("call", ["put_many", "prepare_many"])
def test_put_many_refuses_more_than_one_thread_and_writes_nothing(store, call):
    puts, _ = _thread("one")
    other, _ = _thread("two")
    with pytest.raises(InvalidCheckpointInput, match="put_many writes one thread, got 2"):
        getattr(store, call)([puts[0], other[0]])
    assert store.get_tuple({"configurable": {"thread_id": "one"}}) is None


# prepare_many is put_many's work without a connection, for an import's read-ahead thread.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_a_batch_prepared_in_another_thread_reads_back_as_put_many_leaves_it(store):
    puts, writes = _thread("prepared")
    prepared, opened = [], []
    alias = getattr(store, "db_alias", None)

    def prepare():
        prepared.append(store.prepare_many(puts, writes))
        # Django's connections are per thread: this one opened none.
        opened.append(alias is not None and connections[alias].connection is not None)

    worker = threading.Thread(target=prepare)
    worker.start()
    worker.join()
    assert opened == [False]
    # PostgreSQL encodes the statement ahead; the others encode as they store.
    assert (prepared[0].encoded is not None) == (store.provider == "postgres")
    configs = store.put_prepared(prepared[0])
    assert [c["configurable"]["checkpoint_id"] for c in configs] == [p[1]["id"] for p in puts]
    store.put_many(*_thread("batched"))
    assert len(_read(store, "prepared")) == 5
    assert _read(store, "prepared") == _read(store, "batched")
    _assert_stamped(store, puts)


@pytest.mark.parametrize("provider", IN_PROCESS)
def test_a_value_the_serializer_refuses_is_refused_prepared_too(store):
    puts, _ = _thread("one")
    config, checkpoint, metadata, versions = puts[0]
    bad = {**checkpoint, "channel_values": {"x": object()}}
    # Refused by the serializer, in prepare_many where the store encodes ahead, else when
    # the batch is stored; named either way.
    with pytest.raises(CheckpointCodecError, match=r"(?s)\bx\b.*\bobject\b") as refused:
        store.put_prepared(store.prepare_many([(config, bad, metadata, {"x": "1"})]))
    assert "channel" in str(refused.value)
    assert store.get_tuple({"configurable": {"thread_id": "one"}}) is None


@pytest.mark.django_db(transaction=True, databases=["default", "pg"])
def test_on_postgresql_a_thread_is_one_statement(monkeypatch):
    from checkpoints.store.postgres.sql import PUT_BATCH
    from checkpoints.store.registry import get_saver

    saver = get_saver("postgres", using="pg")
    real = saver._execute
    statements = []

    def execute(cur, sql, params, **options):
        statements.append(sql)
        return real(cur, sql, params, **options)

    monkeypatch.setattr(saver, "_execute", execute)
    puts, writes = _thread("one-trip")
    saver.put_many(puts, writes)
    assert statements == [PUT_BATCH]
    assert len(_read(saver, "one-trip")) == 5
