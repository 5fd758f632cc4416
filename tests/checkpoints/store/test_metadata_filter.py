"""list(filter=...) on every provider: exact keys, and dotted keys as paths into nested
metadata where no key is spelled so (SqliteSaver's reading; the peers' own test asks it)."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6


def _put(saver, thread_id: str, metadata: dict) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    saver.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, checkpoint, metadata, {}
    )


def _found(saver, filter: dict) -> set[str]:
    return {t.config["configurable"]["thread_id"] for t in saver.list(None, filter=filter)}


def test_a_dotted_key_reads_a_nested_value_unless_a_key_is_spelled_so(store):
    _put(store, "nested", {"source": "input", "user": {"access-level": "nested", "n": 1}})
    _put(store, "flat", {"source": "input", "user.access-level": "flat"})
    _put(store, "other", {"source": "input", "user": {"access-level": "other"}})
    _put(store, "scalar", {"source": "input", "user": "not a dict"})
    assert _found(store, {"user.access-level": "nested"}) == {"nested"}
    assert _found(store, {"user.access-level": "flat"}) == {"flat"}
    assert _found(store, {"user.n": 1, "source": "input"}) == {"nested"}
    assert _found(store, {"user.n": True}) == set()  # True is not 1 in a filter
    assert _found(store, {"user.missing": None}) == set()
    # Exact keys still match whole values, nested dicts included.
    assert _found(store, {"user": {"access-level": "other"}}) == {"other"}


def test_filter_keys_are_data_on_every_store(store):
    _put(store, "t", {"source": "input", "a'); DROP TABLE x; --": 1})
    assert _found(store, {"a'); DROP TABLE x; --": 1}) == {"t"}
    assert _found(store, {"$.source": "input"}) == set()
