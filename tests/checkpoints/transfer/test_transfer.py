"""Threads written by real graphs with LangGraph's own savers, imported into ours.

The judge is LangGraph: each checkpoint is read back through the peer saver's own
``list``/``get_tuple`` and ours, and an interrupted thread is resumed on both.
"""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.constants import TASKS
from langgraph.types import Send

from checkpoints.errors import ThreadExists
from checkpoints.transfer import (
    SaverSource,
    TransferFormatError,
    copy_threads,
    export_threads,
    verify_thread,
)
from checkpoints.transfer.records import open_output, read_export
from tests.checkpoints.transfer.graphs import BIG, THREADS, build, resume, seed
from tests.store_helpers import IN_PROCESS, backing_saver


def thread_of(saver, thread_id):
    return list(saver.list({"configurable": {"thread_id": thread_id}}))


def assert_same(peer, ours, thread_ids=THREADS):
    """Every checkpoint, parent, metadata, value and pending write as the peer reads it."""
    for thread_id in thread_ids:
        theirs = thread_of(peer, thread_id)
        assert theirs, thread_id
        assert len(thread_of(ours, thread_id)) == len(theirs), thread_id
        for tup in theirs:
            got = ours.get_tuple(tup.config)
            assert got is not None, tup.config
            for key in ("id", "ts", "v", "channel_versions", "versions_seen", "channel_values"):
                assert got.checkpoint.get(key) == tup.checkpoint.get(key), (tup.config, key)
            assert got.metadata == tup.metadata
            assert (got.parent_config or {}).get("configurable", {}).get("checkpoint_id") == (
                tup.parent_config or {}
            ).get("configurable", {}).get("checkpoint_id")
            assert [tuple(w) for w in got.pending_writes] == [
                tuple(w) for w in tup.pending_writes
            ], tup.config


def test_import_from_langgraph_saver(peer, store):
    seed(peer)
    summary = copy_threads(peer, store, verify=True)
    assert (summary.threads, summary.skipped, summary.refused) == (len(THREADS), 0, 0)
    assert summary.checkpoints == sum(len(thread_of(peer, t)) for t in THREADS)
    assert summary.writes == sum(len(t.pending_writes) for x in THREADS for t in thread_of(peer, x))
    assert summary.bytes > 0
    assert_same(peer, store)
    big = store.get_tuple({"configurable": {"thread_id": "t-big"}})
    assert big.checkpoint["channel_values"]["big"] == BIG
    # Resuming an interrupted thread on ours gives what the peer gives.
    for thread_id, answer in (("t-waiting", "dave"), ("t-again-waiting", "erin")):
        assert resume(store, thread_id, answer) == resume(peer, thread_id, answer)
        assert build(store).get_state({"configurable": {"thread_id": thread_id}}).values == (
            build(peer).get_state({"configurable": {"thread_id": thread_id}}).values
        )


# The retention and marks to move are set and read through the in-process saver's extras,
# which the transfer tool reads a source by; a RemoteSaver offers neither.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_retention_and_finished_marks_move_with_their_threads(lg_sqlite, store):
    from datetime import UTC, datetime, timedelta

    from checkpoints.store.memory import MemorySaver, MemoryStore
    from checkpoints.store.planning.retention import ThreadRetention

    seed(lg_sqlite)
    due = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    copy_threads(lg_sqlite, store, thread_ids=["t-done"])
    store.set_thread_retention("t-done", ThreadRetention(waiting_minutes=9, finished_minutes=5))
    store.mark_finished("t-done", due, "alice")
    # From ours to another store of ours (a private memory store).
    other = MemorySaver(store=MemoryStore())
    summary = copy_threads(store, other, verify=True)
    assert summary.threads == 1
    assert other.thread_retention("t-done") == ThreadRetention(9, 5)
    mark = other.finished_mark("t-done")
    assert (mark.due_at, mark.owner) == (due, "alice")


def test_second_run_changes_nothing(lg_sqlite, store):
    seed(lg_sqlite)
    copy_threads(lg_sqlite, store)
    before = {
        t: (thread_of(store, t), store.get_durability({"configurable": {"thread_id": t}}))
        for t in THREADS
    }
    again = copy_threads(lg_sqlite, store)
    assert (again.threads, again.checkpoints, again.skipped) == (0, 0, len(THREADS))
    after = {
        t: (thread_of(store, t), store.get_durability({"configurable": {"thread_id": t}}))
        for t in THREADS
    }
    assert after == before


def test_conflict_fail_names_the_thread_and_writes_nothing(lg_sqlite, store):
    seed(lg_sqlite)
    copy_threads(lg_sqlite, store, thread_ids=["t-waiting"])
    with pytest.raises(ThreadExists, match="'t-waiting'"):
        copy_threads(lg_sqlite, store, on_conflict="fail")
    assert [t for t in THREADS if thread_of(store, t)] == ["t-waiting"]


def export_to(tmp_path, source, name="export.jsonl"):
    path = str(tmp_path / name)
    with open_output(path) as stream:
        summary = export_threads(source, stream)
    return path, summary


@pytest.mark.parametrize("name", ["export.jsonl", "export.jsonl.zst"])
def test_export_then_import_round_trips(lg_sqlite, store, tmp_path, name):
    seed(lg_sqlite)
    path, exported = export_to(tmp_path, lg_sqlite, name)
    with open(path, "rb") as fh:
        head = fh.read(4)
    assert (head == b"\x28\xb5\x2f\xfd") == name.endswith(".zst")
    summary = copy_threads(path, store, verify=True)
    assert (summary.threads, summary.checkpoints) == (exported.threads, exported.checkpoints)
    assert_same(lg_sqlite, store)
    # And out of ours again: the file holds exactly what the store reads.
    back, _ = export_to(tmp_path, store, "back-" + name)
    from checkpoints.codec.serde import store_serializer

    read = {t.thread_id: t for t in read_export(back, store_serializer())}
    assert set(read) == set(THREADS)
    for thread_id, record in read.items():
        verify_thread(record, SaverSource(store).thread(thread_id))


def test_export_format_is_documented_jsonl(lg_sqlite, tmp_path):
    seed(lg_sqlite)
    path, _ = export_to(tmp_path, lg_sqlite)
    with open(path) as fh:
        lines = [json.loads(line) for line in fh]
    assert lines[0] == {"format": "checkpoint-store-export", "version": 1, "source": "SqliteSaver"}
    kinds = [line["kind"] for line in lines[1:]]
    assert kinds.count("thread") == kinds.count("end") == len(THREADS)
    cp = next(line for line in lines if line.get("kind") == "checkpoint" and line["writes"])
    assert set(cp) >= {"ns", "id", "parent", "metadata", "channel_versions", "values", "writes"}
    assert set(cp["writes"][0]) == {"task_id", "task_path", "idx", "channel", "value"}
    assert set(next(iter(cp["values"].values()))) == {"type", "data"}


def test_bad_record_refuses_its_thread_naming_the_line(lg_sqlite, store, tmp_path):
    seed(lg_sqlite)
    path, _ = export_to(tmp_path, lg_sqlite)
    with open(path) as fh:
        lines = fh.readlines()
    # The second checkpoint of the third thread, cut in half.
    starts = [i for i, line in enumerate(lines) if '"kind":"thread"' in line]
    victim = json.loads(lines[starts[2]])["thread_id"]
    bad = starts[2] + 2
    lines[bad] = lines[bad][: len(lines[bad]) // 2] + "\n"
    with open(path, "w") as fh:
        fh.writelines(lines)
    summary = copy_threads(path, store)
    assert summary.refused == 1 and summary.threads == len(THREADS) - 1
    assert f"{path}:{bad + 1}:" in summary.refusals[0]
    assert victim in summary.refusals[0]
    assert backing_saver(store).thread_presence(victim) is None
    assert_same(lg_sqlite, store, [t for t in THREADS if t != victim])


def test_truncated_file_refuses_the_last_thread(lg_sqlite, store, tmp_path):
    seed(lg_sqlite)
    path, _ = export_to(tmp_path, lg_sqlite)
    with open(path) as fh:
        lines = fh.readlines()
    with open(path, "w") as fh:
        fh.writelines(lines[:-3])
    summary = copy_threads(path, store)
    assert summary.refused == 1 and "no end record" in summary.refusals[0]
    assert summary.threads == len(THREADS) - 1


def test_not_an_export_is_refused(tmp_path, store):
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(TransferFormatError, match=r"x.jsonl:1: not a checkpoint-store export"):
        copy_threads(str(path), store)


def test_pre_v4_pending_sends_are_migrated(lg_sqlite, store):
    """A v3 checkpoint keeps its parent's sends as TASKS writes; ours holds them as the
    TASKS channel, the rule of PostgresSaver._migrate_pending_sends."""
    config = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    parent = empty_checkpoint()
    parent["v"] = 3
    stored = lg_sqlite.put(config, parent, {"step": 0}, {})
    sends = [Send("worker", {"n": 1}), Send("worker", {"n": 2})]
    lg_sqlite.put_writes(stored, [(TASKS, s) for s in sends], "task-1")
    child = empty_checkpoint()
    child["v"] = 3
    child["channel_versions"] = {"a": "00000000000000000000000000000002.0"}
    child["channel_values"] = {"a": 1}
    lg_sqlite.put(stored, child, {"step": 1}, {"a": "00000000000000000000000000000002.0"})
    copy_threads(lg_sqlite, store)
    got = store.get_tuple({"configurable": {"thread_id": "old"}})
    assert got.checkpoint["channel_values"][TASKS] == sends
    assert got.checkpoint["channel_versions"][TASKS] == "00000000000000000000000000000002.0"
