"""The store contract of savers/base.py, checked on every provider."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import operator
import sys
import threading
from collections import OrderedDict, defaultdict
from datetime import datetime
from typing import Annotated, TypedDict

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings
from langchain_core.agents import AgentAction
from langchain_core.messages import AIMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from checkpoints.codec import FaithfulJSONCodec
from checkpoints.errors import (
    CheckpointCodecError,
    CheckpointDeleteError,
    CheckpointStoreFormatError,
    InvalidCheckpointInput,
)
from checkpoints.signals import checkpoint_created
from checkpoints.store.planning.delete import DELETE_ROUNDS
from checkpoints.store.planning.format import FORMAT_ERROR_HINT, FORMAT_GENERATION
from checkpoints.store.requests import DeleteRound
from tests.store_helpers import IN_PROCESS, backing_saver, make_saver

# The remote saver's rows are its service's: the SQLite saver on the test database.
ORM_ALIASES = {"sqlite": "default", "postgres": "pg", "remote": "default"}
EXPECTED_DURABILITY = {
    "memory": "memory",
    "sqlite": "disk",
    "postgres": "disk",
    "redis": "memory",
    "remote": "disk",
}
_clock = itertools.count(1)


# -- helpers -------------------------------------------------------------------------------
def put(saver, thread_id, values=None, *, versions=None, parent=None, ns="", metadata=None):
    """Write one checkpoint by hand; ``versions`` are the channels this write changed."""
    values = dict(values or {})
    if versions is None:
        versions = {channel: saver.get_next_version(None) for channel in values}
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict(versions)
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    if parent:
        configurable["checkpoint_id"] = parent
    return saver.put(
        {"configurable": configurable},
        checkpoint,
        metadata if metadata is not None else {"source": "loop", "step": 0},
        dict(versions),
    )


def cid(config) -> str:
    return config["configurable"]["checkpoint_id"]


def ids(tuples) -> list[str]:
    return [cid(t.config) for t in tuples]


def orm_counts(alias: str, thread_id: str | None = None) -> dict[str, int]:
    from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite, Thread

    def rows(model, key):
        qs = model.objects.using(alias)
        return qs.filter(**{key: thread_id}).count() if thread_id is not None else qs.count()

    return {
        "threads": rows(Thread, "thread_id"),
        "checkpoints": rows(Checkpoint, "thread__thread_id"),
        "blobs": rows(ChannelBlob, "thread__thread_id"),
        "writes": rows(PendingWrite, "thread__thread_id"),
    }


def redis_snapshot(thread_id: str | None = None) -> dict:
    """Every key (of one thread) with its whole content."""
    import redis

    from checkpoints.store.redis.keys import thread_prefix

    client = redis.Redis.from_url(settings.REDIS_TEST_URL)
    match = f"{thread_prefix(thread_id)}*" if thread_id is not None else "*"
    out = {}
    for key in client.scan_iter(match=match, count=1000):
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            out[key] = client.smembers(key)
        else:
            out[key] = client.get(key)
    return out


def raw_holdings(provider: str, thread_id: str | None = None):
    """Everything the store physically holds (for one thread), provider by provider."""
    if provider in ORM_ALIASES:
        return orm_counts(ORM_ALIASES[provider], thread_id)
    if provider == "memory":
        from checkpoints.store.memory import STORE

        def mine(key):
            return thread_id is None or key == thread_id

        return {
            "checkpoints": sum(
                len(by_id)
                for tid, by_ns in STORE.checkpoints.items()
                if mine(tid)
                for by_id in by_ns.values()
            ),
            "blobs": sum(1 for k in STORE.blobs if mine(k[0])),
            "writes": sum(len(v) for k, v in STORE.writes.items() if mine(k[0])),
        }
    return redis_snapshot(thread_id)


def blob_count(provider: str) -> int:
    if provider in ORM_ALIASES:
        return orm_counts(ORM_ALIASES[provider])["blobs"]
    if provider == "memory":
        from checkpoints.store.memory import STORE

        return len(STORE.blobs)
    # Redis keeps a namespace's channel values in one hash, ``cp:{tag}:b:<ns>``.
    return sum(len(v) for k, v in redis_snapshot().items() if b":b:" in k)


def holds_nothing(provider: str, thread_id: str) -> bool:
    found = raw_holdings(provider, thread_id)
    if provider == "redis":
        return found == {}
    return all(count == 0 for count in found.values())


# -- durability ---------------------------------------------------------------------------
def test_every_written_checkpoint_carries_its_durability(store, provider):
    before = datetime.now().astimezone()
    first = put(store, "dur", {"x": 1})
    second = put(store, "dur", {"x": 2}, parent=cid(first), metadata={"source": "loop", "step": 1})
    assert store.durability == EXPECTED_DURABILITY[provider]
    listed = list(store.list({"configurable": {"thread_id": "dur"}}))
    assert ids(listed) == [cid(second), cid(first)]
    for item in listed:
        stamp = store.get_durability(item.config)
        assert set(stamp) == {"level", "at"}
        assert stamp["level"] == EXPECTED_DURABILITY[provider]
        assert datetime.fromisoformat(stamp["at"]) >= before
    assert store.get_durability(second)["level"] == store.durability
    # Without a checkpoint id: the newest checkpoint's stamp.
    assert store.get_durability({"configurable": {"thread_id": "dur"}}) == store.get_durability(
        second
    )
    assert store.get_durability({"configurable": {"thread_id": "no-such-thread"}}) is None


def test_the_stamp_is_kept_beside_the_metadata_the_graph_wrote(store):
    # LangGraph's own savers give back exactly the metadata written (plus config keys);
    # ours too: the durability stamp is not a metadata key.
    written = {"source": "loop", "step": 3, "parents": {}, "custom": {"nested": [1, "a"]}}
    stored = put(store, "exact", {"x": 1}, metadata=written)
    assert store.get_tuple(stored).metadata == written
    assert "_durability" not in next(iter(store.list(stored))).metadata
    assert store.get_durability(stored)["level"] == store.durability


def test_aget_durability_matches_the_sync_accessor(store):
    stored = put(store, "adur", {"x": 1})
    assert asyncio.run(store.aget_durability(stored)) == store.get_durability(stored)


# -- unchanged channels are stored once ----------------------------------------------------
def test_unchanged_channel_is_not_stored_again(store, provider):
    v1 = store.get_next_version(None)
    first = put(store, "blobs", {"a": "A", "b": "B1"}, versions={"a": v1, "b": v1})
    after_first = blob_count(provider)
    assert after_first == 2

    v2 = store.get_next_version(v1)
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
    checkpoint["channel_values"] = {"a": "A", "b": "B2"}
    checkpoint["channel_versions"] = {"a": v1, "b": v2}
    second = store.put(first, checkpoint, {"source": "loop", "step": 1}, {"b": v2})

    assert blob_count(provider) == after_first + 1
    assert store.get_tuple(first).checkpoint["channel_values"] == {"a": "A", "b": "B1"}
    assert store.get_tuple(second).checkpoint["channel_values"] == {"a": "A", "b": "B2"}


def test_list_rows_sharing_large_values_each_read_their_own(store):
    # Past the compression threshold, so every row holding them shares one stored frame.
    document = " ".join(f"word{i % 997}" for i in range(30_000))
    other = document.upper()
    items = [{"n": i, "text": "x" * 100} for i in range(1_000)]
    versions = {c: store.get_next_version(None) for c in ("doc", "items", "step")}
    config = put(store, "sharing", {"doc": document, "items": items, "step": 0}, versions=versions)
    expected = [{"doc": document, "items": items, "step": 0}]
    for step in range(1, 6):
        changed = {"step": step}
        if step == 3:
            changed["doc"] = other
        values = {**expected[-1], **changed}
        new_versions = {c: store.get_next_version(versions[c]) for c in changed}
        versions = {**versions, **new_versions}
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=next(_clock)))
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(versions)
        config = store.put(config, checkpoint, {"source": "loop", "step": step}, new_versions)
        expected.append(values)

    thread = {"configurable": {"thread_id": "sharing", "checkpoint_ns": ""}}
    rows = [t.checkpoint["channel_values"] for t in store.list(thread, limit=10)]
    assert rows == expected[::-1]
    # A value a caller can change is its own object in every row: changing one changes no other.
    rows[0]["items"].append("changed")
    assert all(row["items"] == items for row in rows[1:])


# -- strict serializer ---------------------------------------------------------------------
@dataclasses.dataclass
class Smuggled:
    """Claims to live in a stdlib module nothing here imports."""

    payload: str


Smuggled.__module__ = "tabnanny"
Smuggled.__qualname__ = "Smuggled"


@pytest.mark.parametrize(
    "provider",
    [
        *IN_PROCESS,
        pytest.param("remote", marks=pytest.mark.remote),
    ],
)
def test_stored_bytes_never_choose_what_gets_imported(saver_factory, provider, monkeypatch):
    from langgraph.checkpoint.serde import _msgpack

    from checkpoints.codec.serde import BlockedTypeError

    # LANGGRAPH_STRICT_MSGPACK=false loosens LangGraph's default serializer; LangGraph reads
    # it at import, so mirror that reading too. The deployment's list (strict) wins over it.
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", "false")
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", False)
    strict = {**settings.CHECKPOINTS, "ALLOWED_MSGPACK_MODULES": [], "BLOCKED_TYPES": "raise"}
    with override_settings(CHECKPOINTS=strict):
        store = saver_factory()
        assert "tabnanny" not in sys.modules
        kept = put(store, "strict", {"x": 1})
        before = raw_holdings(provider)
        if provider == "redis":
            # The faithful JSON codec refuses a class off its allowlist at write.
            assert isinstance(store.serde, FaithfulJSONCodec)
            with pytest.raises(CheckpointCodecError, match="CODEC_ALLOWED_MODULES") as caught:
                put(store, "strict", {"value": Smuggled("boom")}, parent=cid(kept))
            assert "tabnanny.Smuggled" in str(caught.value)
            assert raw_holdings(provider) == before
        else:
            # LangGraph's msgpack, strict: the class is not revived, and (BLOCKED_TYPES
            # "raise") reading it back fails naming it instead of handing back its fields.
            assert store.serde.pickle_fallback is False
            assert store.serde._allowed_msgpack_modules is None
            written = put(store, "strict", {"value": Smuggled("boom")}, parent=cid(kept))
            with pytest.raises(BlockedTypeError, match="tabnanny.Smuggled") as caught:
                store.get_tuple(written)
            assert caught.value.field == "tabnanny.Smuggled"
            assert isinstance(caught.value, CheckpointCodecError)
        assert "tabnanny" not in sys.modules


@dataclasses.dataclass
class Shipment:
    """A graph's own state class, outside every module the codec lists."""

    sku: str
    count: int


class Parcel(BaseModel):
    label: str
    weight: float


def test_state_classes_round_trip_under_the_default_configuration(saver_factory, provider):
    """What InMemorySaver gives back, every provider gives back: same types, same values."""
    store = saver_factory()
    action = AgentAction(tool="search", tool_input="q", log="go")
    values = {
        "shipment": Shipment("a-1", 2),
        "parcel": Parcel(label="p", weight=1.5),
        "action": action,
        "text": AIMessage("hello there").text,
        "ordered": OrderedDict([("b", 1), ("a", 2)]),
        "counts": defaultdict(int, {"x": 3}),
    }
    back = store.get_tuple(put(store, "default-types", values)).checkpoint["channel_values"]
    reference = InMemorySaver()
    written = put(reference, "default-types", values, versions=dict.fromkeys(values, 1))
    expected = reference.get_tuple(written).checkpoint["channel_values"]
    for name in values:
        assert type(back[name]) is type(expected[name]), name
        assert back[name] == expected[name], name
    assert list(back["ordered"]) == ["b", "a"]
    assert type(back["text"]) is str and back["text"] == "hello there"


def test_a_lone_surrogate_is_refused_naming_the_channel_and_path(saver_factory, provider):
    store = saver_factory()
    kept = put(store, "surrogate", {"x": 1})
    before = raw_holdings(provider)
    with pytest.raises(CheckpointCodecError) as caught:
        put(store, "surrogate", {"notes": {"items": ["ok?", "a\ud800b"]}}, parent=cid(kept))
    assert "notes" in str(caught.value) and ".items[1]" in str(caught.value)
    assert "lone surrogate" in str(caught.value)
    if provider != "redis":  # its codec names the path (channel_values.notes.items[1])
        assert caught.value.field == "channel 'notes'"
        assert str(caught.value).startswith("channel 'notes' holds a dict")
    assert raw_holdings(provider) == before
    with pytest.raises(CheckpointCodecError) as caught:
        store.put_writes(kept, [("draft", "a\ud800b")], "task-1")
    assert "lone surrogate" in str(caught.value) and "draft" in str(caught.value)
    if provider != "redis":
        assert caught.value.field == "write to channel 'draft'"
    assert raw_holdings(provider) == before
    # A question mark on its own is just text.
    again = put(store, "surrogate", {"notes": "why?"}, parent=cid(kept))
    assert store.get_tuple(again).checkpoint["channel_values"]["notes"] == "why?"


# -- format generation (durable ORM stores) -------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def orm_saver(request):
    return make_saver(request, request.param)


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_store_without_recorded_format_is_refused(orm_saver):
    from checkpoints.models import StoreFormat
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.registry import get_saver

    alias = orm_saver.using
    put(orm_saver, "old", {"x": 1})
    StoreFormat.objects.using(alias).all().delete()
    forget_format_checks()
    try:
        with pytest.raises(CheckpointStoreFormatError) as caught:
            get_saver(orm_saver.provider, using=alias)
        assert FORMAT_ERROR_HINT in str(caught.value)
        assert "records no format generation" in str(caught.value)
        assert FORMAT_ERROR_HINT.startswith("reset the checkpoint store before starting")
        assert (
            "export_checkpoints" in FORMAT_ERROR_HINT and "import_checkpoints" in FORMAT_ERROR_HINT
        )

        StoreFormat.objects.using(alias).create(
            generation=FORMAT_GENERATION - 1, recorded_at=datetime.now().astimezone()
        )
        forget_format_checks()
        with pytest.raises(CheckpointStoreFormatError) as caught:
            get_saver(orm_saver.provider, using=alias)
        message = str(caught.value)
        assert f"generation {FORMAT_GENERATION - 1}" in message
        assert str(FORMAT_GENERATION) in message
        assert FORMAT_ERROR_HINT in message
        # The refused store is left as it was.
        assert orm_counts(alias)["checkpoints"] == 1
        assert list(StoreFormat.objects.using(alias).values_list("generation", flat=True)) == [
            FORMAT_GENERATION - 1
        ]
    finally:
        forget_format_checks()


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_empty_store_records_its_format(orm_saver):
    from checkpoints.models import StoreFormat
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.registry import get_saver

    alias = orm_saver.using
    StoreFormat.objects.using(alias).all().delete()
    forget_format_checks()
    try:
        get_saver(orm_saver.provider, using=alias)
        assert list(StoreFormat.objects.using(alias).values_list("generation", flat=True)) == [
            FORMAT_GENERATION
        ]
    finally:
        forget_format_checks()


# -- delete_thread -------------------------------------------------------------------------
def test_delete_thread_removes_everything_however_much(store, provider):
    parent = None
    for step in range(300):
        written = put(
            store,
            "big",
            {"n": step, "const": "same"} if step == 0 else {"n": step},
            parent=parent,
            metadata={"source": "loop", "step": step},
        )
        if step % 3 == 0:
            store.put_writes(written, [("n", step), ("note", f"w{step}")], task_id=f"t{step}")
        parent = cid(written)
    put(store, "neighbour", {"n": -1})
    backing = backing_saver(store)
    assert backing.thread_holdings("big").checkpoints == 300
    assert backing.thread_holdings("big").writes == 200
    neighbour_before = raw_holdings(provider, "neighbour")

    store.delete_thread("big")

    assert backing.thread_holdings("big").empty
    assert list(store.list({"configurable": {"thread_id": "big"}})) == []
    assert store.get_tuple({"configurable": {"thread_id": "big"}}) is None
    assert holds_nothing(provider, "big")
    assert "big" not in backing.threads()
    assert raw_holdings(provider, "neighbour") == neighbour_before
    assert store.get_tuple({"configurable": {"thread_id": "neighbour"}}) is not None


def _racing_writer(monkeypatch, store, thread_id, rounds: int | None):
    """Make a real writer re-add a checkpoint right after each delete round."""
    original = store.perform
    calls = []

    def perform_with_writer(request):
        left = original(request)
        if not isinstance(request, DeleteRound):
            return left
        calls.append(tuple(request.thread_ids))
        if rounds is None or len(calls) <= rounds:
            put(store, thread_id, {"x": len(calls)})
            left = {**left, thread_id: store.thread_holdings(thread_id)}
        return left

    monkeypatch.setattr(store, "perform", perform_with_writer)
    return calls


# The racing writer hooks the saver's own delete rounds (``perform``) in this process.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_delete_thread_gives_up_on_a_writer_that_never_stops(store, provider, monkeypatch):
    put(store, "contested", {"x": 0})
    calls = _racing_writer(monkeypatch, store, "contested", rounds=None)
    with pytest.raises(CheckpointDeleteError) as caught:
        store.delete_thread("contested")
    message = str(caught.value)
    assert "'contested'" in message
    assert "1 checkpoint(s) and 0 pending write(s)" in message
    if provider == "redis":
        assert len(calls) == 2
    else:
        assert len(calls) == DELETE_ROUNDS
        assert f"after {DELETE_ROUNDS} delete rounds" in message


@pytest.mark.parametrize("provider", IN_PROCESS)
def test_delete_thread_repeats_until_a_racing_writer_is_outrun(store, provider, monkeypatch):
    put(store, "raced", {"x": 0})
    # Redis gives up on the first round (from the second) that makes no progress.
    rounds = 1 if provider == "redis" else 3
    calls = _racing_writer(monkeypatch, store, "raced", rounds=rounds)
    store.delete_thread("raced")
    assert len(calls) == rounds + 1
    assert store.thread_holdings("raced").empty
    assert store.get_tuple({"configurable": {"thread_id": "raced"}}) is None


# -- max_checkpoints and prune -------------------------------------------------------------
def test_max_checkpoints_keeps_the_newest_per_thread_and_namespace(saver_factory):
    saver = saver_factory(max_checkpoints=3)
    written = {}
    for thread_id, ns, count in (("t1", "", 6), ("t1", "sub:1", 5), ("t2", "", 2)):
        written[(thread_id, ns)] = [
            cid(put(saver, thread_id, {"n": i}, ns=ns, metadata={"source": "loop", "step": i}))
            for i in range(count)
        ]
    for (thread_id, ns), made in written.items():
        kept = ids(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}))
        assert kept == list(reversed(made))[:3]
    newest = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert newest.checkpoint["channel_values"] == {"n": 5}


def test_prune_keep_last_returns_how_many_it_deleted(store):
    made = {
        thread_id: [
            cid(put(store, thread_id, {"n": i}, metadata={"source": "loop", "step": i}))
            for i in range(count)
        ]
        for thread_id, count in (("p1", 5), ("p2", 4), ("p3", 1))
    }
    assert store.prune(["p1", "p2", "p3"], keep_last=2) == 3 + 2 + 0
    for thread_id, created in made.items():
        assert (
            ids(store.list({"configurable": {"thread_id": thread_id}}))
            == list(reversed(created))[:2]
        )
    assert store.prune(["p1"]) == 1
    assert store.prune(["p2"], strategy="delete") == 2
    assert store.get_tuple({"configurable": {"thread_id": "p2"}}) is None
    assert store.prune(["nobody"], keep_last=1) == 0
    with pytest.raises(InvalidCheckpointInput, match="keep_last"):
        store.prune(["p1"], keep_last=0)


def test_a_kept_checkpoint_whose_parent_a_prune_deleted_has_no_parent(store):
    """As PostgresSaver leaves it: a "back one step" from the kept head never meets a
    checkpoint that is gone."""
    first = put(store, "orphan", {"n": 0})
    second = put(store, "orphan", {"n": 1}, parent=cid(first))
    third = put(store, "orphan", {"n": 2}, parent=cid(second))
    assert store.prune(["orphan"], keep_last=2) == 1

    def parent_of(tup):
        return cid(tup.parent_config) if tup.parent_config else None

    kept = list(store.list({"configurable": {"thread_id": "orphan"}}))
    assert {cid(t.config): parent_of(t) for t in kept} == {
        cid(third): cid(second),
        cid(second): None,
    }
    at = {"configurable": {"thread_id": "orphan", "checkpoint_id": cid(second)}}
    assert store.get_tuple(at).parent_config is None
    assert store.get_tuple(at).checkpoint["channel_values"] == {"n": 1}


def test_keep_latest_deletes_a_subgraph_call_with_the_root_checkpoint_it_started_from(store):
    """PostgresSaver 3.2.0's rule: a call's namespace ("node:task-id") goes whole once the
    root checkpoint it started from is stored and pruned; a checkpointer=True subgraph's
    namespace ("node") outlives each call and keeps its newest; a call whose root is not
    stored yet (runs save in the background) stays."""

    def at(ns, parent, root, n):
        meta = {"source": "loop", "step": n, "parents": {"": root} if root else {}}
        return put(store, "calls", {"n": n}, ns=ns, parent=parent, metadata=meta)

    r1 = cid(at("", None, None, 1))
    r2 = cid(at("", r1, None, 2))
    r3 = cid(at("", r2, None, 3))
    c1 = cid(at("sub:task-a", None, r1, 1))
    at("sub:task-a", c1, r1, 2)
    d1 = cid(at("sub:task-b", None, r3, 1))
    e1 = cid(at("sub:task-c", None, "not-stored-yet", 1))
    m1 = cid(at("memo", None, r1, 1))
    m2 = cid(at("memo", m1, r2, 2))

    assert store.prune(["calls"]) == 2 + 2 + 1  # r1, r2; task-a whole; m1

    def held(ns):
        return ids(store.list({"configurable": {"thread_id": "calls", "checkpoint_ns": ns}}))

    assert (held(""), held("sub:task-a"), held("sub:task-b")) == ([r3], [], [d1])
    assert (held("sub:task-c"), held("memo")) == ([e1], [m2])


def _extend(state: list, batches: list) -> list:
    return state + [item for batch in batches for item in batch]


class DeltaState(TypedDict, total=False):
    # Never snapshots within the test: every value is rebuilt from the root.
    items: Annotated[list, DeltaChannel(_extend, snapshot_frequency=1000)]
    total: Annotated[int, operator.add]


class SnapshottingDeltaState(TypedDict, total=False):
    # Snapshots every third update, so checkpoints before a snapshot may go.
    items: Annotated[list, DeltaChannel(_extend, snapshot_frequency=3)]
    total: Annotated[int, operator.add]


def _delta_step(state):
    return {"items": [f"n{len(state['items'])}"], "total": 1}


def _delta_graph(state_class, checkpointer):
    builder = StateGraph(state_class)
    builder.add_node("step", _delta_step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=checkpointer)


def test_prune_keeps_the_delta_chain_a_channel_replays_from(store):
    expected = {
        "items": ["in0", "n1", "in1", "n3", "in2", "n5", "in3", "n7", "in4", "n9"],
        "total": 5,
    }
    counts = {}
    for thread_id, state_class in (("seedless", DeltaState), ("snapshots", SnapshottingDeltaState)):
        graph = _delta_graph(state_class, store)
        config = {"configurable": {"thread_id": thread_id}}
        for i in range(5):
            graph.invoke({"items": [f"in{i}"], "total": 0}, config)
        assert graph.get_state(config).values == expected
        before = len(list(store.list(config)))
        assert before == 15

        deleted = store.prune([thread_id])

        after = len(list(store.list(config)))
        counts[thread_id] = (deleted, after)
        assert deleted == before - after
        assert graph.get_state(config).values == expected, thread_id
        assert graph.invoke({"items": ["more"], "total": 0}, config) == {
            "items": [*expected["items"], "more", "n11"],
            "total": 6,
        }
    # Without a snapshot the whole chain back to the root stays; with one, older ones go.
    assert counts["seedless"] == (0, 15)
    assert counts["snapshots"][0] > 0


# -- checkpoint_created signal -------------------------------------------------------------
# The signal's sender is the saver that wrote, in its own process: a receiver gets that
# saver, which a remote worker does not hold (the service's fires in the service).
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_checkpoint_created_fires_once_per_put_after_commit(store, provider):
    received = []

    def visible_elsewhere(checkpoint_id) -> bool:
        from checkpoints.models import Checkpoint

        seen = []

        def look():
            alias = ORM_ALIASES[provider]
            try:
                seen.append(
                    Checkpoint.objects.using(alias).filter(checkpoint_id=checkpoint_id).exists()
                )
            finally:
                connections[alias].close()

        worker = threading.Thread(target=look)
        worker.start()
        worker.join(10)
        return seen == [True]

    def receiver(sender, **kwargs):
        received.append(kwargs)
        if provider in ORM_ALIASES:
            kwargs["visible"] = visible_elsewhere(kwargs["checkpoint_id"])

    checkpoint_created.connect(receiver, weak=False)
    try:
        first = put(store, "signal", {"x": 1}, metadata={"source": "input", "step": -1})
        second = put(store, "signal", {"x": 2}, parent=cid(first), ns="child:1")
    finally:
        checkpoint_created.disconnect(receiver)

    assert [r["checkpoint_id"] for r in received] == [cid(first), cid(second)]
    assert [r["checkpoint_ns"] for r in received] == ["", "child:1"]
    assert {r["thread_id"] for r in received} == {"signal"}
    assert all(r["saver"] is store for r in received)
    envelope = received[0]["envelope"]
    assert set(envelope) == {"config", "checkpoint", "metadata"}
    assert cid(envelope["config"]) == cid(first)
    assert envelope["checkpoint"]["channel_values"] == {"x": 1}
    assert envelope["metadata"]["source"] == "input"
    assert "_durability" not in envelope["metadata"]
    assert received[0]["durability"]["level"] == store.durability
    assert received[0]["durability"] == store.get_durability(first)
    if provider in ORM_ALIASES:
        assert [r["visible"] for r in received] == [True, True]


# -- bad input -----------------------------------------------------------------------------
def test_bad_input_is_refused_and_changes_nothing(store, provider):
    kept = put(store, "kept", {"x": 1})
    store.put_writes(kept, [("x", 2)], task_id="task")
    before = raw_holdings(provider)

    with pytest.raises(InvalidCheckpointInput, match="thread_id"):
        put(store, "", {"x": 1})
    with pytest.raises(InvalidCheckpointInput, match="thread_id"):
        store.get_tuple({"configurable": {}})
    with pytest.raises(InvalidCheckpointInput, match="thread_id"):
        list(store.list({"configurable": {"checkpoint_ns": ""}}))
    with pytest.raises(InvalidCheckpointInput, match="checkpoint_id"):
        store.put_writes({"configurable": {"thread_id": "kept"}}, [("x", 3)], task_id="t2")
    assert store.get_tuple({"configurable": {"thread_id": "kept", "checkpoint_id": "nope"}}) is None
    assert store.get_tuple({"configurable": {"thread_id": "nobody"}}) is None
    assert raw_holdings(provider) == before


def test_value_the_serializer_refuses_leaves_the_store_unchanged(store, provider):
    kept = put(store, "kept", {"x": 1})
    before = raw_holdings(provider)

    with pytest.raises(CheckpointCodecError) as caught:
        put(store, "kept", {"fine": 1, "bad_channel": threading.Lock()}, parent=cid(kept))
    assert "bad_channel" in str(caught.value)
    with pytest.raises(CheckpointCodecError) as caught:
        store.put_writes(kept, [("ok", 1), ("bad_write", threading.Lock())], task_id="t")
    assert "bad_write" in str(caught.value)

    assert raw_holdings(provider) == before
    assert ids(store.list({"configurable": {"thread_id": "kept"}})) == [cid(kept)]
    assert store.get_tuple(kept).pending_writes == []


# -- metadata filter keys are data -----------------------------------------------------------
HOSTILE_KEYS = [
    "a__b",
    "a.b",
    "a'b",
    'a"b',
    "x; DROP TABLE checkpoints_checkpoint; --",
    "$.a",
    "source__icontains",
]


def test_hostile_filter_keys_are_data_never_sql(store, provider):
    nested = cid(put(store, "keys", {}, metadata={"source": "loop", "step": 0, "a": {"b": 1}}))
    by_key = {
        key: cid(put(store, "keys", {}, metadata={"source": "loop", "step": i + 1, key: 1}))
        for i, key in enumerate(HOSTILE_KEYS)
    }
    everything = {nested, *by_key.values()}

    for key, expected in by_key.items():
        # A dotted key is also a path into nested metadata (planning.metadata_matches):
        # "a.b" finds {"a": {"b": 1}} too; every other key is only the key spelled so.
        wanted = {expected, nested} if key == "a.b" else {expected}
        found = ids(store.list({"configurable": {"thread_id": "keys"}}, filter={key: 1}))
        assert set(found) == wanted and len(found) == len(wanted), key
        assert set(ids(store.list(None, filter={key: 1}))) == wanted, key
        assert list(store.list(None, filter={key: 2})) == [], key
    assert ids(store.list(None, filter={"a": {"b": 1}})) == [nested]
    assert list(store.list(None, filter={"a": 1})) == []
    assert list(store.list(None, filter={"source__icontains": "loop"})) == []
    assert list(store.list(None, filter={"a__b": {"b": 1}})) == []
    assert set(ids(store.list(None, filter={"source": "loop"}))) == everything

    # The tables (or keys) are all still there.
    assert len(list(store.list(None))) == len(everything)
    if provider in ORM_ALIASES:
        assert orm_counts(ORM_ALIASES[provider])["checkpoints"] == len(everything)


# -- awkward thread ids --------------------------------------------------------------------
LONG_ID = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(160))
# The longest id every provider's key index holds: MAX_THREAD_ID_BYTES of UTF-8.
LONGEST_ID = "é" * 511 + "xy"


@pytest.mark.parametrize(
    "thread_id",
    ["team/a/run/7", "ünïcødé-线程-🧵", LONGEST_ID],
    ids=["slashes", "unicode", "1kb"],
)
def test_awkward_thread_ids_round_trip(store, thread_id):
    assert len(LONGEST_ID.encode()) == 1024
    first = put(store, thread_id, {"x": 1})
    second = put(store, thread_id, {"x": 2}, parent=cid(first))
    store.put_writes(second, [("x", 3)], task_id="task")

    found = store.get_tuple({"configurable": {"thread_id": thread_id}})
    assert found.config["configurable"]["thread_id"] == thread_id
    assert found.checkpoint["channel_values"] == {"x": 2}
    assert found.parent_config["configurable"]["thread_id"] == thread_id
    assert [w[1:] for w in found.pending_writes] == [("x", 3)]
    listed = list(store.list({"configurable": {"thread_id": thread_id}}))
    assert ids(listed) == [cid(second), cid(first)]
    assert thread_id in backing_saver(store).threads()
    # A prefix of the id is another thread.
    assert store.get_tuple({"configurable": {"thread_id": thread_id[:-1]}}) is None

    store.delete_thread(thread_id)
    assert store.get_tuple({"configurable": {"thread_id": thread_id}}) is None


def test_too_long_thread_id_is_refused_cleanly(store):
    from checkpoints.errors import InvalidCheckpointInput

    assert len(LONG_ID) == 10240
    for call in (
        lambda: put(store, LONG_ID, {"x": 1}),
        lambda: store.get_tuple({"configurable": {"thread_id": LONG_ID}}),
        lambda: list(store.list({"configurable": {"thread_id": LONG_ID}})),
        lambda: store.delete_thread(LONG_ID),
    ):
        with pytest.raises(
            InvalidCheckpointInput, match="10240 bytes long; the store takes at most 1024"
        ):
            call()
    assert backing_saver(store).threads() == []


# -- owner from configurable.user_id (ORM) ---------------------------------------------------
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_owner_comes_from_configurable_user_id(orm_saver):
    from django.contrib.auth import get_user_model

    from checkpoints.models import Thread

    alias = orm_saver.using
    user = get_user_model().objects.db_manager(alias).create_user("ada", password="x" * 12)

    def owner_after_put(thread_id, user_id):
        checkpoint = empty_checkpoint()
        orm_saver.put(
            {"configurable": {"thread_id": thread_id, "user_id": user_id}},
            checkpoint,
            {"source": "input", "step": -1},
            {},
        )
        return Thread.objects.using(alias).get(thread_id=thread_id).owner_id

    assert owner_after_put("by-pk", str(user.pk)) == user.pk
    assert owner_after_put("by-int", user.pk) == user.pk
    assert owner_after_put("by-name", "ada") == user.pk
    assert owner_after_put("nobody", "grace") is None
    assert owner_after_put("no-user", "") is None


def test_thread_storage_sizes_by_table_and_channel(store):
    import os

    blob = os.urandom(20_000)  # incompressible: its stored size stays near its length
    first = put(store, "sized", {"blob": blob, "small": "s"})
    second = put(store, "sized", {"blob": os.urandom(20_000)}, parent=cid(first))
    store.put_writes(second, [("small", "w" * 5_000)], task_id="t1")
    put(store, "neighbour", {"blob": os.urandom(50_000)})

    backing = backing_saver(store)
    sized = backing.thread_storage("sized")
    assert set(sized.tables) == {"checkpoints", "channel_values", "pending_writes"}
    assert 40_000 <= sized.channels["blob"] < 60_000  # both versions, none of the neighbour's
    assert 5_000 <= sized.channels["small"] < 6_000  # its value and the pending write
    assert sized.tables["pending_writes"] >= 5_000 and sized.tables["checkpoints"] > 0
    values = sized.tables["channel_values"] + sized.tables["pending_writes"]
    assert values == sum(sized.channels.values())
    assert sized.total == sum(sized.tables.values()) < 70_000
    empty = backing.thread_storage("never-written")
    assert empty.total == 0 and empty.channels == {}
