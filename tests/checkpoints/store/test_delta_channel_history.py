"""get_delta_channel_history on every provider, against LangGraph's InMemorySaver.

The behaviours of the conformance suite's ninth capability (delta_channel_history, on
LangGraph's main branch): writes oldest first; the seed from the nearest stored value (a
DeltaChannel snapshot, or a pre-delta plain value); the seed ancestor's own writes replayed;
the target's pending writes left out; channels ending their walks independently; no seed
when the walk reaches the root; an empty answer for no channels. Each chain is written the
same way to our saver and to InMemorySaver, and the answers must be equal, through the sync
method, the async one, and the harness's sync-driven wrapper (what the suite will call).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from tests.conformance import SyncDriven

# step -> the values written to the checkpoint's channel_values (a seed for the walk).
Stored = dict[int, dict]
# step -> the writes (channel, value) put on that checkpoint after it.
Writes = dict[int, list[tuple[str, object]]]


def write_chain(saver, thread_id: str, steps: int, stored: Stored, writes: Writes) -> list:
    """``steps`` checkpoints, each the child of the previous; the configs returned."""
    configs: list = []
    parent = None
    for step in range(steps):
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        values = stored.get(step, {})
        versions = {name: step + 1 for name in values}
        checkpoint = Checkpoint(
            v=1,
            id=str(uuid6(clock_seq=-1)),
            ts="2026-01-01T00:00:00+00:00",
            channel_values=values,
            channel_versions=versions,
            versions_seen={},
            updated_channels=None,
        )
        parent = saver.put(config, checkpoint, {"source": "loop", "step": step}, versions)
        configs.append(parent)
        for i, write in enumerate(writes.get(step, [])):
            # One task per write: each its own row, ordered by task id within the step.
            saver.put_writes(parent, [write], f"task-{step}-{i:02d}")
    return configs


def plain(history: dict) -> dict:
    """The answer with snapshots unwrapped and writes as (channel, value) pairs: task ids
    are the same on both sides, and compared too."""
    out = {}
    for name, entry in history.items():
        one = {"writes": [(w[0], w[1], w[2]) for w in entry["writes"]]}
        if "seed" in entry:
            seed = entry["seed"]
            one["seed"] = ("snapshot", seed.value) if isinstance(seed, _DeltaSnapshot) else seed
        out[name] = one
    return out


def answers(store, steps, stored, writes, channels, target=-1, extra=None) -> tuple:
    """The history at ``configs[target]`` from ``store`` (sync, async and through the
    harness's wrapper) and from InMemorySaver, for the same chain."""
    ours = write_chain(store, f"ours-{uuid.uuid4().hex}", steps, stored, writes)
    reference = InMemorySaver()
    theirs = write_chain(reference, "theirs", steps, stored, writes)
    if extra:
        store.put_writes(ours[target], extra, "task-target")
        reference.put_writes(theirs[target], extra, "task-target")
    sync = store.get_delta_channel_history(config=ours[target], channels=channels)
    async_ = asyncio.run(store.aget_delta_channel_history(config=ours[target], channels=channels))
    wrapped = asyncio.run(
        SyncDriven(store).aget_delta_channel_history(config=ours[target], channels=channels)
    )
    expected = reference.get_delta_channel_history(config=theirs[target], channels=channels)
    assert plain(sync) == plain(async_) == plain(wrapped)
    return plain(sync), plain(expected)


def test_writes_come_oldest_first(store):
    ours, theirs = answers(
        store,
        5,
        {0: {"ch": _DeltaSnapshot(0)}},
        {step: [("ch", step)] for step in range(1, 5)},
        ["ch"],
    )
    assert ours == theirs
    # The head's own writes are pending for the next step: steps 1 to 3 only.
    assert [w[2] for w in ours["ch"]["writes"]] == [1, 2, 3]


def test_writes_within_a_step_keep_their_task_order(store):
    ours, theirs = answers(
        store,
        3,
        {0: {"ch": _DeltaSnapshot([])}},
        {1: [("ch", "a"), ("ch", "b"), ("ch", "c")], 2: [("ch", "d")]},
        ["ch"],
    )
    assert ours == theirs
    assert [w[2] for w in ours["ch"]["writes"]] == ["a", "b", "c"]


def test_the_seed_is_the_nearest_snapshot(store):
    ours, theirs = answers(
        store,
        6,
        {0: {"ch": _DeltaSnapshot(0)}, 3: {"ch": _DeltaSnapshot(3)}},
        {step: [("ch", step)] for step in (1, 2, 4, 5)},
        ["ch"],
    )
    assert ours == theirs
    assert ours["ch"] == {"writes": [("task-4-00", "ch", 4)], "seed": ("snapshot", 3)}


def test_a_pre_delta_plain_value_is_the_seed(store):
    ours, theirs = answers(
        store,
        4,
        {1: {"ch": [10, 20, 30]}},
        {step: [("ch", step)] for step in (0, 2, 3)},
        ["ch"],
    )
    assert ours == theirs
    assert ours["ch"]["seed"] == [10, 20, 30]
    assert [w[2] for w in ours["ch"]["writes"]] == [2]


def test_the_seed_ancestors_own_writes_are_replayed(store):
    # Writes stored on the snapshot's checkpoint came after it: they are part of the walk.
    ours, theirs = answers(
        store,
        4,
        {1: {"ch": _DeltaSnapshot("s")}},
        {step: [("ch", step)] for step in range(4)},
        ["ch"],
    )
    assert ours == theirs
    assert [w[2] for w in ours["ch"]["writes"]] == [1, 2]
    assert ours["ch"]["seed"] == ("snapshot", "s")


def test_the_targets_pending_writes_are_left_out(store):
    ours, theirs = answers(
        store,
        3,
        {0: {"ch": _DeltaSnapshot(0)}},
        {1: [("ch", 1)], 2: [("ch", 2)]},
        ["ch"],
        extra=[("ch", "extra")],
    )
    assert ours == theirs
    assert "extra" not in [w[2] for w in ours["ch"]["writes"]]
    assert [w[2] for w in ours["ch"]["writes"]] == [1]


def test_channels_end_their_walks_independently(store):
    ours, theirs = answers(
        store,
        5,
        {1: {"a": _DeltaSnapshot("snap_a")}, 3: {"b": _DeltaSnapshot("snap_b")}},
        {step: [("a", step), ("b", step)] for step in range(5)},
        ["a", "b"],
    )
    assert ours == theirs
    assert [w[2] for w in ours["a"]["writes"]] == [1, 2, 3]
    assert [w[2] for w in ours["b"]["writes"]] == [3]


def test_a_walk_to_the_root_has_no_seed(store):
    ours, theirs = answers(
        store, 4, {}, {step: [("ch", step)] for step in range(4)}, ["ch", "never"]
    )
    assert ours == theirs
    assert "seed" not in ours["ch"] and "seed" not in ours["never"]
    assert [w[2] for w in ours["ch"]["writes"]] == [0, 1, 2]
    assert ours["never"] == {"writes": []}


@pytest.mark.parametrize("target", [0, 2])
def test_no_channels_is_an_empty_answer_and_a_middle_target_walks_its_own_past(store, target):
    ours, theirs = answers(
        store, 4, {0: {"ch": _DeltaSnapshot(0)}}, {s: [("ch", s)] for s in range(4)}, []
    )
    assert ours == theirs == {}
    ours, theirs = answers(
        store,
        4,
        {0: {"ch": _DeltaSnapshot(0)}},
        {s: [("ch", s)] for s in range(4)},
        ["ch"],
        target=target,
    )
    assert ours == theirs
    assert [w[2] for w in ours["ch"]["writes"]] == list(range(target))


def test_the_harness_wrapper_declares_the_capability():
    # The suite detects a capability by the async method being overridden: the sync-driven
    # wrapper must override it, or every provider's sync path reports it as missing.
    from langgraph.checkpoint.base import BaseCheckpointSaver

    for name in ("aget_delta_channel_history", "get_delta_channel_history"):
        assert getattr(SyncDriven, name) is not getattr(BaseCheckpointSaver, name), name
