"""Where the suites of LangGraph's saver packages found ours differing (issue 30)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpoints.errors import InvalidCheckpointInput

_clock = itertools.count(1)


def put(saver, thread_id, *, parent=None, metadata=None, values=None):
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
    values = dict(values or {})
    checkpoint["channel_values"] = values
    versions = {c: saver.get_next_version(None) for c in values}
    checkpoint["channel_versions"] = versions
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if parent:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put(
        {"configurable": configurable},
        checkpoint,
        metadata if metadata is not None else {"source": "loop", "step": 0},
        versions,
    )


def test_a_writes_key_in_metadata_is_kept_and_found(store):
    # The peers' docstrings write {"source": ..., "step": ..., "writes": {...}}; InMemorySaver
    # and SqliteSaver keep it, so a graph moved onto ours must not lose it.
    metadata = {"source": "loop", "step": 1, "writes": {"foo": "bar"}, "score": None}
    config = put(store, "w1", metadata=metadata)
    assert store.get_tuple(config).metadata == metadata
    found = list(store.list(None, filter={"writes": {"foo": "bar"}}))
    assert [t.config["configurable"]["checkpoint_id"] for t in found] == [
        config["configurable"]["checkpoint_id"]
    ]


@pytest.mark.parametrize("strategy", ["keep_latest", "delete"])
def test_prune_refuses_a_bare_string_and_changes_nothing(store, strategy):
    # "ab" is not a list of thread ids; the peer refuses it rather than guess.
    put(store, "ab")
    with pytest.raises(InvalidCheckpointInput, match="thread_ids"):
        store.prune("ab", strategy=strategy)
    assert store.get_tuple({"configurable": {"thread_id": "ab"}}) is not None


def _with_id(saver, config, checkpoint_id, parent=None):
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    configurable = {**config["configurable"]}
    configurable.pop("checkpoint_id", None)
    if parent:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put({"configurable": configurable}, checkpoint, {}, {})


def test_delta_history_walk_stops_on_a_cyclic_parent_chain(store):
    # Re-putting "a" under "b" makes a <-> b; SqliteSaver's walk stops, so must ours.
    root = {"configurable": {"thread_id": "cyc", "checkpoint_ns": ""}}
    a = _with_id(store, root, "1ef4f797-8335-6428-8001-8a1503f9b875")
    b = _with_id(store, root, "1ef4f797-8335-6428-8002-8a1503f9b875", parent=a)
    _with_id(store, root, a["configurable"]["checkpoint_id"], parent=b)
    assert store.get_delta_channel_history(config=b, channels=["items"]) == {
        "items": {"writes": []}
    }
    assert asyncio.run(store.aget_delta_channel_history(config=b, channels=["items"])) == {
        "items": {"writes": []}
    }
