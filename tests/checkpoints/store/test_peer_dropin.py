"""Where the suites of LangGraph's saver packages found ours differing (issue 30)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpoints.errors import InvalidCheckpointInput
from tests.store_helpers import backing_saver

_clock = itertools.count(1)


def put(saver, thread_id, *, parent=None, metadata=None, values=None):
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
    values = dict(values or {})
    checkpoint["channel_values"] = values
    versions = {c: saver.get_next_version(None, None) for c in values}
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
    with pytest.raises(InvalidCheckpointInput, match="thread_ids") as refused:
        store.prune("ab", strategy=strategy)
    # A TypeError naming the str, as PostgresSaver raises, and still our input error.
    assert isinstance(refused.value, TypeError) and "not a str" in str(refused.value)
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


def _none_seed_chain(saver):
    """A root storing None for "ch", then two children writing to it; the head's config."""
    parent = None
    for step in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=1000 + step))
        checkpoint["channel_versions"] = {"ch": "1".zfill(32)}
        new_versions = {}
        if step == 0:
            checkpoint["channel_values"] = {"ch": None}
            new_versions = {"ch": "1".zfill(32)}
        conf = {"thread_id": "none-seed", "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        parent = saver.put(
            {"configurable": conf}, checkpoint, {"source": "loop", "step": step}, new_versions
        )
        if step:
            saver.put_writes(parent, [("ch", f"w{step}")], f"task-{step}")
    return parent


def test_delta_history_seed_is_a_stored_none(store):
    # PostgresSaver 3.2 stores None inline and cannot tell it from "nothing stored", so
    # it reports no seed; the base walk (InMemorySaver, SqliteSaver) and ours keep the
    # value the checkpoint holds, which is None.
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    def history(saver):
        head = _none_seed_chain(saver)
        entry = saver.get_delta_channel_history(config=head, channels=["ch"])["ch"]
        return entry.get("seed", "<no seed>"), tuple(w[2] for w in entry["writes"])

    with SqliteSaver.from_conn_string(":memory:") as sqlite_saver:
        peers = {history(InMemorySaver()), history(sqlite_saver)}
    assert len(peers) == 1
    assert history(store) == peers.pop()


def test_a_checkpoint_from_before_format_v4_reads_its_parents_pending_sends(store, provider):
    # PostgresSaver's rule for old checkpoints (v < 4): the TASKS channel holds the
    # parent's pending sends, in task path, task id, index order. Our database stores
    # apply it as they read, as PostgresSaver does (threads imported from old stores);
    # memory and Redis read as InMemorySaver does, which leaves it out.
    from langgraph.checkpoint.memory import InMemorySaver

    def chain(saver):
        parent = put(saver, "old", values={"a": 1})
        saver.put_writes(parent, [("__pregel_tasks", "send-2")], "task-b", "~b")
        saver.put_writes(parent, [("__pregel_tasks", "send-1"), ("x", 0)], "task-a", "~a")
        child = empty_checkpoint()  # v=2, as langgraph.checkpoint.base stamps by hand
        child["id"] = str(uuid6(clock_seq=next(_clock)))
        child["channel_versions"] = {"a": "5"}
        conf = {**parent["configurable"]}
        return saver.put({"configurable": conf}, child, {"source": "loop", "step": 1}, {})

    config = chain(store)
    # The rule is the database store's: the remote saver's is the service's (SQLite).
    if backing_saver(store).provider in ("sqlite", "postgres"):
        expected_values = {"__pregel_tasks": ["send-1", "send-2"]}
        expected_versions = {"a": "5", "__pregel_tasks": "5"}
    else:
        reference = InMemorySaver()
        expected = reference.get_tuple(chain(reference)).checkpoint
        expected_values, expected_versions = expected["channel_values"], {"a": "5"}
    got = store.get_tuple(config).checkpoint
    assert got["channel_values"] == expected_values
    assert got["channel_versions"] == expected_versions
    listed = next(iter(store.list(config))).checkpoint
    assert listed["channel_values"] == expected_values
    asynced = asyncio.run(store.aget_tuple(config)).checkpoint
    assert asynced["channel_values"] == expected_values

    async def first():
        async for tup in store.alist(config):
            return tup.checkpoint["channel_values"]

    assert asyncio.run(first()) == expected_values


def test_prune_keeps_the_parent_a_pre_v4_head_reads_its_sends_from(store, provider):
    # PostgresSaver 3.2.0's rule, on the stores that read such sends (the ORM ones): the
    # head stays whole; its parent stays with no parent of its own.
    # The remote saver's store is the service's (SQLite), which reads them.
    reads_sends = backing_saver(store).provider in ("sqlite", "postgres")
    if not reads_sends:
        return  # memory and Redis read pre-v4 checkpoints as InMemorySaver: no sends

    def old(parent):
        checkpoint = empty_checkpoint()  # v=2
        checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
        conf = {"thread_id": "pre-v4", "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        return store.put({"configurable": conf}, checkpoint, {"source": "loop", "step": 0}, {})

    first = old(None)
    store.put_writes(first, [("__pregel_tasks", "send-1")], "t1")
    second = old(first)
    head = old(second)
    store.put_writes(second, [("__pregel_tasks", "send-2")], "t2")
    assert store.prune(["pre-v4"]) == (1 if reads_sends else 2)
    thread = {"configurable": {"thread_id": "pre-v4", "checkpoint_ns": ""}}
    ids = [t.config["configurable"]["checkpoint_id"] for t in store.list(thread)]
    kept = [head, second] if reads_sends else [head]
    assert ids == [c["configurable"]["checkpoint_id"] for c in kept]
    if not reads_sends:
        assert store.get_tuple(head).parent_config is None
        return
    loaded = store.get_tuple(head)
    assert loaded.checkpoint["channel_values"]["__pregel_tasks"] == ["send-2"]
    assert (
        loaded.parent_config["configurable"]["checkpoint_id"]
        == second["configurable"]["checkpoint_id"]
    )
    assert store.get_tuple(second).parent_config is None


@pytest.mark.parametrize(
    "root_id, child_id", [("z-older", "a-newer"), ("a-older", "z-newer")], ids=["above", "below"]
)
def test_the_delta_walk_reaches_a_versioned_seed_whatever_the_id_order(store, root_id, child_id):
    # SqliteSaver's parent-walk tests, with the seed put as LangGraph puts values: with a
    # channel version. Their own seed has none; a value with no version is no channel
    # state ours keeps (values are stored, sealed, by channel and version), and InMemorySaver
    # and PostgresSaver drop it too, as the last lines show.
    from langgraph.checkpoint.memory import InMemorySaver

    def chain(saver, versioned: bool, ids=(root_id, child_id)):
        conf = {"configurable": {"thread_id": "walk", "checkpoint_ns": ""}}
        root = empty_checkpoint()
        root["id"], root["channel_values"] = ids[0], {"ch": "seed"}
        versions = {"ch": "1".zfill(32)} if versioned else {}
        root["channel_versions"] = dict(versions)
        parent = saver.put(conf, root, {}, versions)
        saver.put_writes(parent, [("ch", "write-root")], "task")
        for cid in ids[1:]:
            child = empty_checkpoint()
            child["id"] = cid  # no value of its own: the walk goes on to the root
            parent = saver.put(parent, child, {}, {})
        return parent

    head = chain(store, versioned=True)
    expected = {"writes": [("task", "ch", "write-root")], "seed": "seed"}
    assert store.get_delta_channel_history(config=head, channels=["ch"])["ch"] == expected
    if child_id > root_id:  # an empty id reads the newest, by id, as every saver does
        latest = {"configurable": {"thread_id": "walk", "checkpoint_ns": "", "checkpoint_id": ""}}
        assert store.get_delta_channel_history(config=latest, channels=["ch"])["ch"] == expected
    long_ids = [f"id-{n:03d}" for n in range(40, 0, -1)]  # each parent sorts above its child
    store.delete_thread("walk")
    head = chain(store, versioned=True, ids=long_ids)
    assert store.get_delta_channel_history(config=head, channels=["ch"])["ch"] == expected
    store.delete_thread("walk")
    reference = InMemorySaver()
    unversioned = reference.get_delta_channel_history(
        config=chain(reference, versioned=False), channels=["ch"]
    )
    head = chain(store, versioned=False)
    assert store.get_delta_channel_history(config=head, channels=["ch"]) == unversioned


def test_a_re_put_without_new_versions_keeps_the_stored_values(store):
    # A channel's value is stored once per version, when a put names the version in
    # new_versions (LangGraph's contract): re-putting a checkpoint with other values and
    # no new versions changes none, on ours as on InMemorySaver (SqliteSaver, which keeps
    # each checkpoint's values whole, would take the new ones).
    from langgraph.checkpoint.memory import InMemorySaver

    def values_after_re_put(saver):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = "re-put"
        checkpoint["channel_values"] = {"items": ["first"]}
        checkpoint["channel_versions"] = {"items": "1".zfill(32)}
        conf = {"configurable": {"thread_id": "re", "checkpoint_ns": ""}}
        saver.put(conf, checkpoint, {}, {"items": "1".zfill(32)})
        checkpoint["channel_values"] = {"items": ["second"]}
        config = saver.put(conf, checkpoint, {}, {})
        return saver.get_tuple(config).checkpoint["channel_values"]

    assert (
        values_after_re_put(store) == values_after_re_put(InMemorySaver()) == {"items": ["first"]}
    )


@pytest.mark.parametrize("provider", ["memory", "sqlite", "postgres"])
def test_prune_keeps_the_ancestor_a_version_with_nothing_stored_reads_from(store):
    # A DeltaChannel snapshot in the root, and a head moving the channel to a version with
    # nothing stored and no counters in its metadata (PostgresSaver's "snapshot" evidence):
    # LangGraph rebuilds the value from ancestors, so a prune keeps them. PostgresSaver
    # refuses to prune such a thread; ours keeps the chain whole. (Redis stores no row
    # for "no value", so it cannot tell the two apart: there only the counters count.)
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    def add(parent, step, values, version):
        checkpoint = empty_checkpoint()
        checkpoint.update(v=4, id=str(uuid6(clock_seq=2000 + step)), channel_values=values)
        checkpoint["channel_versions"] = {"m": version}
        conf = {"thread_id": "snap", "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        metadata = {"source": "loop", "step": step, "parents": {}}
        return store.put({"configurable": conf}, checkpoint, metadata, {k: version for k in values})

    first = add(None, 0, {"m": _DeltaSnapshot([1])}, "1")
    head = add(first, 1, {}, "2")
    before = store.get_delta_channel_history(config=head, channels=["m"])
    assert before["m"]["seed"] == _DeltaSnapshot([1])
    assert store.prune(["snap"]) == 0
    assert store.get_delta_channel_history(config=head, channels=["m"]) == before
