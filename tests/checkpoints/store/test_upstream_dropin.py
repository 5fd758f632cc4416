"""langgraph-checkpoint 4.3's drop-in rules, on every provider against InMemorySaver."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver


def _put(saver, thread_id: str, ns: str, step: int, metadata=None):
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=3000 + step))
    conf = {"thread_id": thread_id, "checkpoint_ns": ns}
    return saver.put(
        {"configurable": conf}, checkpoint, {"source": "loop", "step": step, **(metadata or {})}, {}
    )


def _listed(saver, configurable: dict) -> list[tuple[str, int]]:
    """(namespace, step) of each listed checkpoint (ids differ between savers)."""
    return sorted(
        (t.config["configurable"]["checkpoint_ns"], t.metadata["step"])
        for t in saver.list({"configurable": configurable})
    )


def _thread(saver) -> None:
    _put(saver, "ns", "", 0)
    _put(saver, "ns", "child:1", 1)
    _put(saver, "ns", "", 2)


def test_list_with_an_empty_namespace_lists_the_root_namespace_only(store):
    reference = InMemorySaver()
    _thread(reference)
    _thread(store)
    for configurable in (
        {"thread_id": "ns", "checkpoint_ns": ""},
        {"thread_id": "ns", "checkpoint_ns": "child:1"},
        {"thread_id": "ns"},
    ):
        assert _listed(store, configurable) == _listed(reference, configurable), configurable
    assert {ns for ns, _ in _listed(store, {"thread_id": "ns", "checkpoint_ns": ""})} == {""}


def test_pending_writes_come_back_in_writes_sort_key_order(store):
    def writes(saver):
        config = _put(saver, "order", "", 0)
        saver.put_writes(config, [("b", 1), ("a", 2)], "task-z", "~2")
        saver.put_writes(config, [("c", 3)], "task-a", "~10")
        saver.put_writes(config, [("__interrupt__", "ask")], "task-m", "~1")
        saver.put_writes(config, [("d", 4)], "task-b", "~1")
        return [(w[0], w[1], w[2]) for w in saver.get_tuple(config).pending_writes]

    assert writes(store) == writes(InMemorySaver())


def test_delta_counters_in_metadata_are_kept(store):
    counters = {"counters_since_delta_snapshot": {"messages": [3, 1], "log": [1, 0]}}
    config = _put(store, "counters", "", 0, counters)
    stored = store.get_tuple(config).metadata
    assert stored["counters_since_delta_snapshot"] == counters["counters_since_delta_snapshot"]
    found = list(store.list(None, filter=counters))
    assert [t.config["configurable"]["thread_id"] for t in found] == ["counters"]
