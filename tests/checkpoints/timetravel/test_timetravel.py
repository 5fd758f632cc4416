"""TimeTravel's contract on every provider: snapshots, history, rollback, fork, bulk update,
lineage, errors (nothing written), and the async twins."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async

from checkpoints.errors import (
    CheckpointNotFound,
    InvalidCheckpointInput,
    ThreadExists,
    ThreadNotFound,
    ThreadVersionConflict,
)
from checkpoints.signals import thread_forked
from checkpoints.timetravel import StateSnapshot, TimeTravel
from tests.checkpoints.timetravel.graphs import build_graph, ids, seeded
from tests.store_helpers import backing_saver, config_for


def test_get_state_latest_and_by_id(store):
    graph, tt = seeded(store)
    head = tt.get_state("t")
    assert isinstance(head, StateSnapshot)
    assert head.values == {"log": ["a", "b"], "n": 20}
    assert head.next == [] and head.pending_tasks == [] and head.pending_writes == []
    assert head.metadata["source"] == "loop" and head.metadata["step"] == 2
    assert head.metadata["written_by"] == ["b"]
    assert head.config["configurable"]["thread_id"] == "t"
    assert head.channel_versions == store.get_tuple(config_for("t")).checkpoint["channel_versions"]

    middle_id = ids(tt, "t")[1]
    middle = tt.get_state("t", middle_id)
    assert middle.values == {"log": ["a"], "n": 2}
    assert middle.next == ["b"]
    assert middle.metadata["written_by"] == ["a"]
    assert middle.metadata["parents"] == [ids(tt, "t")[2]]
    # Pending tasks carry LangGraph's own task ids, so they join the pending writes.
    lg = graph.get_state({"configurable": {"thread_id": "t", "checkpoint_id": middle_id}})
    assert [t["id"] for t in middle.pending_tasks] == [task.id for task in lg.tasks]
    assert [t["name"] for t in middle.pending_tasks] == ["b"]
    assert {(w["task_id"], w["channel"], repr(w["value"])) for w in middle.pending_writes} == {
        (lg.tasks[0].id, "log", "['b']"),
        (lg.tasks[0].id, "n", "20"),
    }
    first = tt.get_state("t", ids(tt, "t")[-1])
    assert first.metadata["parents"] == [] and first.metadata["source"] == "input"
    assert first.next == ["__start__"]

    data = head.as_dict()
    assert set(data) == {
        "values",
        "pending_tasks",
        "pending_writes",
        "metadata",
        "config",
        "next",
        "channel_versions",
        "interrupts",
        "durability",
    }
    assert data["durability"] == store.get_durability(head.config)
    assert data["durability"]["level"] == store.durability
    data["values"]["log"].append("changed")
    assert head.values["log"] == ["a", "b"]
    assert data["metadata"]["step"] == 2


def test_unknown_thread_and_checkpoint_are_refused(store):
    _, tt = seeded(store)
    seeded(store, "other")
    other_id = ids(tt, "other")[0]
    with pytest.raises(ThreadNotFound, match="'nope'"):
        tt.get_state("nope")
    with pytest.raises(CheckpointNotFound, match="'missing'.*'t'"):
        tt.get_state("t", "missing")
    with pytest.raises(CheckpointNotFound, match=other_id):
        tt.get_state("t", other_id)
    with pytest.raises(ThreadNotFound):
        tt.get_state_history("nope")
    with pytest.raises(CheckpointNotFound):
        tt.get_state_history("t", before="missing")
    with pytest.raises(InvalidCheckpointInput, match="limit"):
        tt.get_state_history("t", limit=-1)


def test_history_newest_first_with_limit_before_and_source(store):
    _, tt = seeded(store)
    snaps = list(tt.get_state_history("t"))
    assert [(s.metadata["source"], s.metadata["step"]) for s in snaps] == [
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    assert [s.metadata["written_by"] for s in snaps] == [["b"], ["a"], ["__start__"], ["__input__"]]
    assert [s.checkpoint_id for s in tt.get_state_history("t", limit=2)] == [
        s.checkpoint_id for s in snaps[:2]
    ]
    assert [s.checkpoint_id for s in tt.get_state_history("t", before=snaps[1].checkpoint_id)] == [
        s.checkpoint_id for s in snaps[2:]
    ]
    assert [s.metadata["step"] for s in tt.get_state_history("t", source="input")] == [-1]
    assert list(tt.get_state_history("t", limit=0)) == []


class CountingSaver:
    """Passes every call to a real saver, counting the rows its `list` hands out."""

    def __init__(self, saver):
        self.saver = saver
        self.pulled = 0

    def list(self, *args, **kwargs):
        for item in self.saver.list(*args, **kwargs):
            self.pulled += 1
            yield item

    def __getattr__(self, name):
        return getattr(self.saver, name)


def test_history_reads_lazily(store):
    graph = build_graph(store)
    for i in range(5):
        graph.invoke({"log": [], "n": i}, config_for("long"))
    counting = CountingSaver(store)
    tt = TimeTravel(counting)
    walk = tt.get_state_history("long")
    assert counting.pulled == 0
    first = next(walk)
    assert first.values["n"] == 50
    # One row, plus the one read ahead to find its parent: not the 20 the thread holds.
    assert counting.pulled == 2


def test_rollback_writes_new_head_equal_to_target(store):
    _, tt = seeded(store)
    before = ids(tt, "t")
    head_id, target_id = before[0], before[1]
    version = backing_saver(store).thread_version("t")

    snap = tt.rollback("t", target_id, expected_version=version)
    assert backing_saver(store).thread_version("t") == version + 1
    assert snap.checkpoint_id > head_id
    assert snap.metadata["source"] == "rollback"
    assert snap.metadata["step"] == 1
    assert snap.metadata["parents"] == [target_id]
    assert snap.metadata["rollback"] == {"target": target_id, "replaced_head": head_id}
    assert snap.metadata["written_by"] == ["rollback"]
    target = tt.get_state("t", target_id)
    assert snap.values == target.values
    assert snap.channel_versions == target.channel_versions
    assert snap.next == target.next == ["b"]
    # As after LangGraph's update_state(target, None): b's finished writes stay on the
    # target and b runs again from the new head (see test_timetravel_parity.py).
    assert snap.pending_writes == []
    assert [(w["channel"], w["value"]) for w in target.pending_writes] == [
        ("log", ["b"]),
        ("n", 20),
    ]
    raw_new = store.get_tuple(snap.config).checkpoint
    raw_target = store.get_tuple(target.config).checkpoint
    assert raw_new["versions_seen"] == raw_target["versions_seen"]
    assert raw_new["channel_values"] == raw_target["channel_values"]
    assert ids(tt, "t") == [snap.checkpoint_id, *before]
    assert tt.get_state("t").checkpoint_id == snap.checkpoint_id


@pytest.mark.parametrize("bad", ["²", "9" * 5000, "abc", -1, True])
def test_rollback_refuses_an_expected_version_that_is_not_one(store, bad):
    _, tt = seeded(store)
    before, version = ids(tt, "t"), backing_saver(store).thread_version("t")
    with pytest.raises(InvalidCheckpointInput, match="expected_version must be the thread's"):
        tt.rollback("t", before[2], expected_version=bad)
    assert ids(tt, "t") == before and backing_saver(store).thread_version("t") == version
    # Form text naming the right version works like the number.
    assert tt.rollback("t", before[2], expected_version=f" {version} ").checkpoint_id


def test_rollback_with_stale_version_writes_nothing(store):
    _, tt = seeded(store)
    before = ids(tt, "t")
    version = backing_saver(store).thread_version("t")
    with pytest.raises(ThreadVersionConflict, match="'t'"):
        tt.rollback("t", before[2], expected_version=version - 1)
    assert ids(tt, "t") == before
    assert backing_saver(store).thread_version("t") == version
    with pytest.raises(CheckpointNotFound):
        tt.rollback("t", "missing")
    with pytest.raises(ThreadNotFound):
        tt.rollback("nope", before[0])
    assert ids(tt, "t") == before
    assert backing_saver(store).thread_version("t") == version


def test_fork_copies_state_into_new_thread(store):
    _, tt = seeded(store, "src", metadata={"last_event_sequence": 41})
    source_ids = ids(tt, "src")
    middle_id = source_ids[1]
    fork = tt.fork("src", middle_id, "dst")
    assert fork.config["configurable"]["thread_id"] == "dst"
    assert fork.metadata["source"] == "fork"
    assert fork.metadata["parents"] == [middle_id]
    assert fork.metadata["forked_from"] == {"thread_id": "src", "checkpoint_id": middle_id}
    assert fork.metadata["last_event_sequence"] == 41
    assert fork.metadata["step"] == 1
    assert fork.values == {"log": ["a"], "n": 2}
    assert fork.next == ["b"]
    assert fork.pending_writes == []
    assert len(tt.get_state("src", middle_id).pending_writes) == 2
    assert ids(tt, "src") == source_ids
    assert ids(tt, "dst") == [fork.checkpoint_id]
    # Stored with no in-thread parent: the new thread reads without the source's chain.
    assert store.get_tuple(config_for("dst")).parent_config is None
    store.delete_thread("src")
    assert tt.get_state("dst").values == {"log": ["a"], "n": 2}


def test_fork_defaults_to_fresh_thread_and_refuses_existing(store):
    _, tt = seeded(store, "src")
    seeded(store, "taken")
    taken_ids = ids(tt, "taken")
    fork = tt.fork("src", ids(tt, "src")[0])
    assert fork.thread_id not in ("src", "taken") and len(fork.thread_id) == 36
    with pytest.raises(ThreadExists, match="'taken'"):
        tt.fork("src", ids(tt, "src")[0], "taken")
    assert ids(tt, "taken") == taken_ids
    with pytest.raises(ThreadExists):
        tt.fork("src", ids(tt, "src")[0], "src")
    with pytest.raises(CheckpointNotFound):
        tt.fork("src", "missing", "new")
    with pytest.raises(ThreadNotFound):
        tt.fork("nope", "missing", "new")
    assert store.get_tuple(config_for("new")) is None


def test_fork_signal_fires_and_failing_receiver_does_not_undo(store, caplog):
    _, tt = seeded(store, "src")
    seen = []

    def record(sender, **kwargs):
        seen.append((kwargs["source_thread_id"], kwargs["new_thread_id"], kwargs["snapshot"]))

    def explode(sender, **kwargs):
        raise RuntimeError("receiver broke")

    thread_forked.connect(record, dispatch_uid="tt-record")
    thread_forked.connect(explode, dispatch_uid="tt-explode")
    try:
        with caplog.at_level(logging.ERROR, logger="checkpoints.timetravel"):
            fork = tt.fork("src", ids(tt, "src")[0], "dst")
    finally:
        thread_forked.disconnect(dispatch_uid="tt-record")
        thread_forked.disconnect(dispatch_uid="tt-explode")
    assert seen == [("src", "dst", fork)]
    assert "receiver broke" in caplog.text and "'dst'" in caplog.text
    assert tt.get_state("dst").checkpoint_id == fork.checkpoint_id


def test_bulk_update_replays_reducers_into_one_checkpoint(store):
    _, tt = seeded(store)
    before = ids(tt, "t")
    head = tt.get_state("t")
    snap = tt.bulk_update_state(
        "t",
        [
            [{"channel": "log", "value": ["x"]}, {"channel": "log", "value": ["y"]}],
            [{"channel": "n", "value": 5}],
            [{"channel": "log", "value": ["z"]}],
        ],
    )
    assert snap.values == {"log": ["a", "b", "x", "y", "z"], "n": 5}
    assert snap.metadata["source"] == "bulk_update"
    assert snap.metadata["step"] == 5
    assert snap.metadata["parents"] == [before[0]]
    assert ids(tt, "t") == [snap.checkpoint_id, *before]

    def number(version):
        return int(str(version).split(".")[0])

    assert number(snap.channel_versions["log"]) == number(head.channel_versions["log"]) + 2
    assert number(snap.channel_versions["n"]) == number(head.channel_versions["n"]) + 1
    untouched = set(head.channel_versions) - {"log", "n"}
    assert {k: snap.channel_versions[k] for k in untouched} == {
        k: head.channel_versions[k] for k in untouched
    }

    # Each update builds fresh channels: nothing carries over from the previous call.
    again = tt.bulk_update_state("t", [[{"channel": "log", "value": ["w"]}]])
    assert again.values == {"log": ["a", "b", "x", "y", "z", "w"], "n": 5}
    assert again.metadata["parents"] == [snap.checkpoint_id]


def test_bulk_update_refusals_write_nothing(store):
    _, tt = seeded(store)
    before = ids(tt, "t")
    with pytest.raises(ThreadNotFound, match="use fork"):
        tt.bulk_update_state("empty", [[{"channel": "log", "value": ["x"]}]])
    assert store.get_tuple(config_for("empty")) is None
    with pytest.raises(InvalidCheckpointInput, match="'ghost'"):
        tt.bulk_update_state(
            "t", [[{"channel": "log", "value": ["x"]}], [{"channel": "ghost", "value": 1}]]
        )
    with pytest.raises(InvalidCheckpointInput, match="'n'"):
        tt.bulk_update_state("t", [[{"channel": "n", "value": 1}, {"channel": "n", "value": 2}]])
    with pytest.raises(InvalidCheckpointInput, match=r"supersteps\[0\]\[0\]"):
        tt.bulk_update_state("t", [[{"value": 1}]])
    with pytest.raises(InvalidCheckpointInput, match="'log'"):
        TimeTravel(backing_saver(store)).bulk_update_state(
            "t", [[{"channel": "log", "value": ["x"]}]]
        )
    assert ids(tt, "t") == before


def test_lineage_across_two_forks(store):
    _, tt = seeded(store, "origin")
    origin_mid = ids(tt, "origin")[1]
    first = tt.fork("origin", origin_mid, "one")
    tt.bulk_update_state("one", [[{"channel": "n", "value": 7}]])
    one_head = ids(tt, "one")[0]
    second = tt.fork("one", one_head, "two")
    assert tt.lineage("two") == [
        {"thread_id": "two", "checkpoint_id": second.checkpoint_id},
        {"thread_id": "one", "checkpoint_id": one_head},
        {"thread_id": "origin", "checkpoint_id": origin_mid},
    ]
    assert tt.lineage("one") == [
        {"thread_id": "one", "checkpoint_id": one_head},
        {"thread_id": "origin", "checkpoint_id": origin_mid},
    ]
    assert first.metadata["forked_from"]["thread_id"] == "origin"
    assert tt.lineage("origin") == [{"thread_id": "origin", "checkpoint_id": ids(tt, "origin")[0]}]
    with pytest.raises(ThreadNotFound):
        tt.lineage("nope")


@pytest.mark.asyncio
async def test_async_twins(store):
    # The ORM savers refuse sync calls on the event loop; set up and check from a thread.
    _, tt = await sync_to_async(seeded)(store, "src", metadata={"last_event_sequence": 3})
    sync_ids = await sync_to_async(ids)(tt, "src")
    version_of = sync_to_async(backing_saver(store).thread_version)
    head = await tt.aget_state("src")
    assert head.values == {"log": ["a", "b"], "n": 20}
    assert (await tt.aget_state("src", sync_ids[1])).next == ["b"]
    assert [s.checkpoint_id async for s in tt.aget_state_history("src")] == sync_ids
    assert [s.checkpoint_id async for s in tt.aget_state_history("src", limit=1)] == sync_ids[:1]
    assert [s.metadata["step"] async for s in tt.aget_state_history("src", before=sync_ids[2])] == [
        -1
    ]
    assert [s.metadata["step"] async for s in tt.aget_state_history("src", source="input")] == [-1]
    with pytest.raises(ThreadNotFound):
        await tt.aget_state("nope")
    with pytest.raises(CheckpointNotFound):
        [s async for s in tt.aget_state_history("src", before="missing")]

    version = await version_of("src")
    with pytest.raises(ThreadVersionConflict):
        await tt.arollback("src", sync_ids[1], expected_version=version + 5)
    assert [s.checkpoint_id async for s in tt.aget_state_history("src")] == sync_ids
    rolled = await tt.arollback("src", sync_ids[1], expected_version=version)
    assert rolled.metadata["rollback"] == {"target": sync_ids[1], "replaced_head": sync_ids[0]}
    assert rolled.values == {"log": ["a"], "n": 2}
    assert await version_of("src") == version + 1

    fork = await tt.afork("src", sync_ids[2], "dst")
    assert fork.metadata["forked_from"] == {"thread_id": "src", "checkpoint_id": sync_ids[2]}
    assert fork.metadata["last_event_sequence"] == 3
    with pytest.raises(ThreadExists):
        await tt.afork("src", sync_ids[2], "dst")

    bulk = await tt.abulk_update_state("dst", [[{"channel": "log", "value": ["k"]}]])
    assert bulk.values == {"log": ["k"], "n": 1}
    assert bulk.metadata["source"] == "bulk_update"
    with pytest.raises(ThreadNotFound, match="use fork"):
        await tt.abulk_update_state("nobody", [[{"channel": "log", "value": ["k"]}]])
    assert await tt.alineage("dst") == [
        {"thread_id": "dst", "checkpoint_id": bulk.checkpoint_id},
        {"thread_id": "src", "checkpoint_id": sync_ids[2]},
    ]


def test_history_filters_on_metadata_as_data(store):
    from checkpoints.timetravel import TimeTravel
    from tests.store_helpers import put_chain

    put_chain(store, "filtered", {"n": 1}, steps=4)
    travel = TimeTravel(backing_saver(store))
    steps = [s.metadata["step"] for s in travel.get_state_history("filtered", filter={"step": 2})]
    assert steps == [2]
    assert list(travel.get_state_history("filtered", filter={"step__gt": 0})) == []
    assert len(list(travel.get_state_history("filtered", source="loop"))) == 4


class RecordingSaver:
    """Passes every call to a real saver, recording which saver methods were called."""

    def __init__(self, saver):
        self.saver = saver
        self.calls = []

    def __getattr__(self, name):
        found = getattr(self.saver, name)
        if not callable(found):
            return found

        def call(*args, **kwargs):
            # An async twin counts as its sync name, so both sides compare step by step.
            twin = name[1:] if name.startswith("a") and hasattr(self.saver, name[1:]) else name
            self.calls.append(twin)
            return found(*args, **kwargs)

        return call


def _sync_operations(store):
    _, tt = seeded(store, "sync-side")
    target = ids(tt, "sync-side")[1]
    tt.saver = recorder = RecordingSaver(tt.saver)
    tt.rollback("sync-side", target)
    tt.fork("sync-side", target, "sync-fork")
    tt.bulk_update_state("sync-fork", [[{"channel": "log", "value": ["k"]}]])
    list(tt.get_state_history("sync-side", limit=3))
    tt.lineage("sync-fork")
    return recorder.calls


@pytest.mark.asyncio
async def test_sync_and_async_twins_make_the_same_saver_calls(store):
    """Each operation is written once: both forms run the same steps in the same order."""
    sync_calls = await sync_to_async(_sync_operations)(store)
    _, tt = await sync_to_async(seeded)(store, "async-side")
    target = (await sync_to_async(ids)(tt, "async-side"))[1]
    tt.saver = recorder = RecordingSaver(tt.saver)
    await tt.arollback("async-side", target)
    await tt.afork("async-side", target, "async-fork")
    await tt.abulk_update_state("async-fork", [[{"channel": "log", "value": ["k"]}]])
    [s async for s in tt.aget_state_history("async-side", limit=3)]
    await tt.alineage("async-fork")
    assert "put" in sync_calls and "put_as_head" in sync_calls
    assert recorder.calls == sync_calls
