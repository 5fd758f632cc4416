"""`bench.per_call` replays a real graph's saver calls: every kind, on any saver."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from bench.per_call import KINDS, record_calls, replay
from checkpoints.store.memory import MemorySaver, MemoryStore


def test_the_recorded_calls_replay_on_ours_and_langgraphs_alike():
    calls = record_calls(turns=2)
    kinds = [kind for kind, _ in calls]
    assert set(kinds) == set(KINDS)
    # Ten nodes a turn plus the input: a checkpoint each, writes after each node.
    assert kinds.count("put") == 2 * 11 + 2 and kinds.count("put_writes") >= 20
    ours, theirs = MemorySaver(store=MemoryStore()), InMemorySaver()
    for saver in (ours, theirs):
        spent = replay(saver, calls, "replayed")
        assert {kind: len(ns) for kind, ns in spent.items()} == {
            kind: kinds.count(kind) for kind in KINDS
        }
        assert all(n >= 0 for ns in spent.values() for n in ns)
    config = {"configurable": {"thread_id": "replayed", "checkpoint_ns": ""}}
    mine, peer = ours.get_tuple(config), theirs.get_tuple(config)
    assert mine.checkpoint["id"] == peer.checkpoint["id"]
    assert mine.checkpoint["channel_values"] == peer.checkpoint["channel_values"]
    assert len(list(ours.list(config))) == len(list(theirs.list(config))) == kinds.count("put")
