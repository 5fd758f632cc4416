"""The Redis saver's own rules: key layout, TTLs, atomic writes, delete, format, outages."""

from __future__ import annotations

import operator
import re
from datetime import timedelta
from typing import Annotated, TypedDict

import pytest
import redis
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from checkpoints.conf import store_settings
from checkpoints.errors import (
    CheckpointCodecError,
    CheckpointDeleteError,
    CheckpointStoreFormatError,
    StoreUnavailable,
    ThreadExists,
    ThreadVersionConflict,
)
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.format import FORMAT_ERROR_HINT, FORMAT_GENERATION
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.redis.keys import FORMAT_KEY, REGISTRY_KEY, thread_prefix
from checkpoints.store.registry import get_saver

CLOSED = "redis://127.0.0.1:6390/0"
# The last is the longest id the store takes (MAX_THREAD_ID_BYTES); longer ones are refused.
ODD_IDS = ["a/b/c", "{braces}}{", "ünïcødé-线程-🧵", "x" * 1024]


@pytest.fixture
def saver(redis_url):
    return get_saver("redis", conn_string=redis_url)


@pytest.fixture
def raw(redis_url):
    return redis.Redis.from_url(redis_url)


def put(saver, thread_id, values, *, ns="", parent=None, metadata=None):
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    versions = {ch: saver.get_next_version(None) for ch in values}
    checkpoint["channel_versions"] = versions
    conf = {"thread_id": thread_id, "checkpoint_ns": ns}
    if parent:
        conf["checkpoint_id"] = parent
    return saver.put({"configurable": conf}, checkpoint, metadata or {"step": 1}, versions)


def thread_keys(raw, thread_id):
    return sorted(raw.scan_iter(match=thread_prefix(thread_id).replace("{", "\\{") + "*"))


def hash_tag(key: bytes) -> bytes:
    start = key.index(b"{")
    return key[start + 1 : key.index(b"}", start + 1)]


@pytest.mark.parametrize("thread_id", ODD_IDS, ids=["slash", "braces", "unicode", "1kb"])
def test_every_key_of_an_odd_thread_id_shares_one_safe_hash_tag(saver, raw, thread_id):
    stored = put(saver, thread_id, {"a": 1})
    saver.put_writes(stored, [("a", 2)], "task")
    keys = thread_keys(raw, thread_id)
    assert len(keys) >= 6
    tags = {hash_tag(k) for k in keys}
    assert len(tags) == 1
    assert re.fullmatch(rb"[0-9a-f]{32}", tags.pop())
    assert all(len(k) < 100 for k in keys)
    got = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert got.config["configurable"]["thread_id"] == thread_id
    assert got.checkpoint["channel_values"] == {"a": 1}
    assert got.pending_writes == [("task", "a", 2)]
    assert saver.threads() == [thread_id]


def test_an_unchanged_channel_is_written_once(saver, raw):
    first = put(saver, "t", {"a": "big" * 10})
    got = saver.get_tuple(first)
    checkpoint = got.checkpoint
    checkpoint["id"] = "1" + checkpoint["id"][1:]
    saver.put(first, checkpoint, {"step": 2}, {})
    blobs = raw.hgetall(thread_prefix("t") + "b:")
    assert len(blobs) == 1
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"] == {
        "a": "big" * 10
    }


def test_every_key_a_write_stores_gets_the_platform_waiting_ttl(saver, raw):
    with override_settings(CHECKPOINTS={**store_settings(), "RETENTION_WAITING_MINUTES": 30}):
        stored = put(saver, "t", {"a": 1})
        saver.put_writes(stored, [("a", 2)], "task")
    keys = thread_keys(raw, "t")
    ttls = [raw.pttl(k) for k in keys]
    assert len(keys) == 7
    assert all(29 * 60000 < ttl <= 30 * 60000 for ttl in ttls), ttls


def test_declared_waiting_retention_is_the_ttl_and_is_reapplied(saver, raw):
    put(saver, "t", {"a": 1})
    assert all(raw.pttl(k) > 60 * 60000 for k in thread_keys(raw, "t"))
    saver.set_thread_retention("t", ThreadRetention(waiting_minutes=5, finished_minutes=2))
    assert saver.thread_retention("t") == ThreadRetention(5, 2)
    assert all(4 * 60000 < raw.pttl(k) <= 5 * 60000 for k in thread_keys(raw, "t"))
    stored = put(saver, "t", {"b": 2})
    saver.put_writes(stored, [("b", 3)], "task")
    keys = thread_keys(raw, "t")
    assert len(keys) == 7
    assert all(4 * 60000 < raw.pttl(k) <= 5 * 60000 for k in keys)


async def test_a_read_never_extends_the_ttl(saver, raw):
    stored = put(saver, "t", {"a": 1})
    saver.put_writes(stored, [("a", 2)], "task")
    for key in thread_keys(raw, "t"):
        raw.pexpire(key, 50_000)
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 1
    assert await saver.aget_tuple(stored) is not None
    assert saver.thread_retention("t") == ThreadRetention()
    assert saver.thread_version("t") == 1
    assert all(0 < raw.pttl(k) <= 50_000 for k in thread_keys(raw, "t"))


def test_a_value_the_codec_refuses_leaves_no_keys(saver, raw):
    with pytest.raises(CheckpointCodecError, match="nan"):
        put(saver, "t", {"a": 1, "b": float("nan")})
    assert thread_keys(raw, "t") == []
    stored = put(saver, "t", {"a": 1})
    with pytest.raises(CheckpointCodecError):
        saver.put_writes(stored, [("a", 2), ("b", object())], "task")
    assert saver.get_tuple(stored).pending_writes == []


def test_regular_writes_keep_the_first_value_special_writes_the_last(saver):
    stored = put(saver, "t", {"a": 1})
    saver.put_writes(stored, [("a", "first"), ("__error__", "first")], "task")
    saver.put_writes(stored, [("a", "second"), ("__error__", "second")], "task")
    assert saver.get_tuple(stored).pending_writes == [
        ("task", "__error__", "second"),
        ("task", "a", "first"),
    ]


def test_filter_keys_are_data(saver):
    put(saver, "t", {"a": 1}, metadata={"step": 1, "a__b": 1, "a.b": "x", "q'": 2})
    listed = {"configurable": {"thread_id": "t"}}
    assert len(list(saver.list(listed, filter={"a__b": 1}))) == 1
    assert len(list(saver.list(listed, filter={"a.b": "x", "q'": 2}))) == 1
    assert list(saver.list(listed, filter={"a": {"b": 1}})) == []
    assert list(saver.list(listed, filter={"a__b__gt": 0})) == []
    assert list(saver.list(None, filter={"step": True})) == []


def test_list_before_and_limit_across_namespaces(saver):
    ids = [
        put(saver, "t", {"a": n}, ns=ns)["configurable"]["checkpoint_id"]
        for n, ns in enumerate(["", "child", "", "child"])
    ]
    everything = [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list({"configurable": {"thread_id": "t"}})
    ]
    assert everything == sorted(ids, reverse=True)
    before = {"configurable": {"checkpoint_id": ids[2]}}
    assert [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, before=before, limit=5
        )
    ] == [ids[0]]
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}, limit=3))) == 3


def test_max_checkpoints_prunes_on_put(redis_url):
    saver = get_saver("redis", conn_string=redis_url, max_checkpoints=2)
    for n in range(4):
        put(saver, "t", {"a": n})
    assert saver.thread_holdings("t").checkpoints == 2
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest.checkpoint["channel_values"] == {"a": 3}


def test_delete_thread_empties_it_and_drops_its_mark(saver, raw):
    stored = put(saver, "t", {"a": 1})
    saver.put_writes(stored, [("a", 2)], "task")
    saver.mark_finished("t", utcnow())
    saver.delete_thread("t")
    assert thread_keys(raw, "t") == []
    assert saver.threads() == []
    assert saver.finished_mark("t") is None


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_delete_fails_at_the_first_round_without_progress(
    saver, redis_url, monkeypatch, path
):
    writer = get_saver("redis", conn_string=redis_url)
    put(saver, "t", {"a": 1})
    rounds = []
    real_round = type(saver)._delete_round_flow

    def racing_round(self, thread_id):
        left = yield from real_round(self, thread_id)
        rounds.append(left)
        # A concurrent run writes a checkpoint and a write between the delete's rounds.
        stored = put(writer, thread_id, {"a": len(rounds)})
        writer.put_writes(stored, [("a", 0)], "task")
        return writer.thread_holdings(thread_id)

    monkeypatch.setattr(type(saver), "_delete_round_flow", racing_round)
    with pytest.raises(CheckpointDeleteError) as failed:
        if path == "sync":
            saver.delete_thread("t")
        else:
            await saver.adelete_thread("t")
    assert len(rounds) == 2
    message = str(failed.value)
    assert "'t'" in message and "1 checkpoint(s) and 1 pending write(s)" in message
    assert "round 2" in message


def test_durability_is_memory_without_aof_fsync_always(saver):
    assert saver.durability == "memory"
    stored = put(saver, "t", {"a": 1})
    assert saver.get_durability(stored)["level"] == "memory"


def test_a_store_without_a_generation_is_refused(redis_url, raw):
    raw.hset("cp:{0123}:m", "id", "old")
    with pytest.raises(CheckpointStoreFormatError) as refused:
        get_saver("redis", conn_string=redis_url)
    assert FORMAT_ERROR_HINT in str(refused.value)
    assert "127.0.0.1:6379" in str(refused.value)
    assert raw.get(FORMAT_KEY) is None


def test_a_store_in_another_generation_is_refused(redis_url, raw):
    raw.set(FORMAT_KEY, "2")
    with pytest.raises(CheckpointStoreFormatError, match="generation 2") as refused:
        get_saver("redis", conn_string=redis_url)
    assert "reset the checkpoint store before starting this version" in str(refused.value)


def test_a_new_store_records_the_generation(redis_url, raw):
    get_saver("redis", conn_string=redis_url)
    assert raw.get(FORMAT_KEY) == str(FORMAT_GENERATION).encode()


def test_a_store_in_the_untagged_layout_of_generation_3_is_refused(redis_url, raw):
    # Generation 3 stores on a single node could still hold the store-wide keys without
    # the {cp} hash tag; generation 4 dropped their renaming, so such a store is refused
    # (export with the version that wrote it, reset, import), never half read.
    raw.set("cp:format", "3")
    raw.set(thread_prefix("t") + "lw", "1")
    with pytest.raises(CheckpointStoreFormatError, match="records no format generation"):
        get_saver("redis", conn_string=redis_url)
    assert raw.get("cp:format") == b"3"  # nothing renamed, nothing lost


def test_unreachable_redis_names_the_address():
    saver = get_saver("redis", conn_string=CLOSED)
    with pytest.raises(StoreUnavailable, match="127.0.0.1:6390"):
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    with pytest.raises(StoreUnavailable, match="127.0.0.1:6390"):
        put(saver, "t", {"a": 1})


async def test_unreachable_redis_names_the_address_async():
    saver = get_saver("redis", conn_string=CLOSED)
    with pytest.raises(StoreUnavailable, match="127.0.0.1:6390"):
        await saver.aget_tuple({"configurable": {"thread_id": "t"}})
    checkpoint = empty_checkpoint()
    with pytest.raises(StoreUnavailable, match="127.0.0.1:6390"):
        await saver.aput({"configurable": {"thread_id": "t"}}, checkpoint, {}, {})


def _pooled_client_ids(client: redis.Redis) -> list[int]:
    """Server-side ids of the connections this client's pool holds (idle or in use)."""
    pool = client.connection_pool
    if isinstance(pool, redis.BlockingConnectionPool):
        # The saver's pool for one server (callers wait for a connection): all it made.
        held = list(pool._connections)
    else:
        held = [*pool._available_connections, *pool._in_use_connections]
    ids = []
    for conn in held:
        conn.send_command("CLIENT", "ID")
        ids.append(int(conn.read_response()))
    return ids


def test_the_same_saver_works_again_after_its_connections_drop(saver, raw):
    stored = put(saver, "t", {"a": 1})
    # Only this saver's own connections: the Redis server is shared with other test runs.
    own = _pooled_client_ids(saver.client)
    assert own
    for client_id in own:
        assert raw.client_kill_filter(_id=client_id) == 1
    raw.script_flush()
    assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": 1}
    put(saver, "t", {"a": 2})
    assert saver.thread_holdings("t").checkpoints == 2


@pytest.mark.django_db  # a copy also checks the target has no park (parks live there)
def test_copy_refuses_a_target_with_checkpoints_and_copies_retention(saver):
    put(saver, "src", {"a": 1})
    saver.set_thread_retention("src", ThreadRetention(waiting_minutes=9))
    put(saver, "busy", {"a": 2})
    with pytest.raises(ThreadExists, match="'busy'"):
        saver.copy_thread("src", "busy")
    assert saver.get_tuple({"configurable": {"thread_id": "busy"}}).checkpoint[
        "channel_values"
    ] == {"a": 2}
    saver.copy_thread("src", "copy")
    assert saver.get_tuple({"configurable": {"thread_id": "copy"}}).checkpoint[
        "channel_values"
    ] == {"a": 1}
    assert saver.thread_retention("copy") == ThreadRetention(9, None)


def test_thread_version_bumps_and_conflicts(saver):
    assert saver.thread_version("t") == 0
    with pytest.raises(ThreadVersionConflict):
        saver.bump_thread_version("t")
    put(saver, "t", {"a": 1})
    assert saver.bump_thread_version("t", expected=1) == 2
    with pytest.raises(ThreadVersionConflict, match="version 2, not 1"):
        saver.bump_thread_version("t", expected=1)


def test_finished_ledger_lives_in_redis(saver, redis_url):
    now = utcnow()
    saver.mark_finished("late", now + timedelta(minutes=5), owner="flows")
    saver.mark_finished("b", now - timedelta(minutes=1))
    saver.mark_finished("a", now - timedelta(minutes=2), owner="agents")
    other = get_saver("redis", conn_string=redis_url)
    due = other.finished_due(now)
    assert [(e.thread_id, e.owner) for e in due] == [("a", "agents"), ("b", "")]
    assert [e.thread_id for e in other.finished_due(now, limit=1)] == ["a"]
    assert other.finished_mark("late").due_at == now + timedelta(minutes=5)
    assert other.unmark_finished("a") is True
    assert other.unmark_finished("a") is False
    assert [e.thread_id for e in saver.finished_due(now)] == ["b"]


def test_threads_forgets_expired_threads(saver, raw):
    put(saver, "old", {"a": 1})
    put(saver, "new", {"a": 1})
    assert sorted(saver.threads()) == ["new", "old"]
    for key in thread_keys(raw, "old"):
        raw.delete(key)
    assert saver.threads() == ["new"]
    assert raw.zcard(REGISTRY_KEY) == 1


class State(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


async def test_a_langgraph_graph_runs_on_the_redis_saver(saver):
    def bump(state: State):
        return {"count": state["count"] + 1, "log": ["bump"]}

    def note(state: State):
        return {"log": [f"count={state['count']}"]}

    builder = StateGraph(State)
    builder.add_node("bump", bump)
    builder.add_node("note", note)
    builder.add_edge(START, "bump")
    builder.add_edge("bump", "note")
    builder.add_edge("note", END)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "graph/run"}}
    first = await graph.ainvoke({"count": 1, "log": []}, config)
    assert first == {"count": 2, "log": ["bump", "count=2"]}
    second = await graph.ainvoke({"count": 10, "log": []}, config)
    assert second["log"] == ["bump", "count=2", "bump", "count=11"]
    state = await graph.aget_state(config)
    assert state.values["count"] == 11
    history = [s async for s in graph.aget_state_history(config)]
    assert len(history) == 8
    assert saver.get_tuple(config).checkpoint["channel_values"]["count"] == 11
