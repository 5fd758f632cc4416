"""A special channel written twice in one put_writes keeps one slot, as InMemorySaver does."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver


def _pending(saver) -> list[tuple[str, str, object]]:
    config = saver.put(
        {"configurable": {"thread_id": "slots", "checkpoint_ns": ""}},
        empty_checkpoint(),
        {"source": "input", "step": -1, "parents": {}},
        {},
    )
    saver.put_writes(
        config,
        [("__interrupt__", "first"), ("a", 1), ("__interrupt__", "last"), ("a", 2)],
        "task-1",
    )
    return sorted(saver.get_tuple(config).pending_writes, key=repr)


def test_a_special_channel_written_twice_in_one_call_keeps_the_last(store):
    # On PostgreSQL the one-statement upsert refused this with a raw CardinalityViolation.
    assert _pending(store) == _pending(InMemorySaver())
