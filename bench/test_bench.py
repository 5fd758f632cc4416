"""Checks of the benchmark's own parts: the workload, the statistics and the raw floors."""

from __future__ import annotations

import sqlite3

from bench.measure import ops_per_second, percentile
from bench.subjects import RawSqlFloor, payload_bytes
from bench.workload import (
    DOCUMENT_CHANNEL,
    MESSAGE_WINDOW,
    SMALL_CHANNELS,
    ChatThread,
    DocumentPool,
)


def _versions(current, channel=None):
    return (current or 0) + 1


def test_chat_thread_bumps_only_changed_channels():
    docs = DocumentPool(count=2)
    thread = ChatThread("t", _versions, docs)
    first, metadata, new_versions = thread.advance()
    assert metadata == {"source": "input", "step": 0, "parents": {}}
    assert set(new_versions) == {"messages", DOCUMENT_CHANNEL, *SMALL_CHANNELS}
    assert 64 * 1024 <= len(first["channel_values"][DOCUMENT_CHANNEL]) <= 256 * 1024
    thread.commit(first, {"configurable": {"thread_id": "t", "checkpoint_id": first["id"]}})
    second, metadata, new_versions = thread.advance()
    assert metadata["source"] == "loop" and metadata["step"] == 1
    assert "messages" in new_versions
    unchanged = set(second["channel_versions"]) - set(new_versions)
    assert unchanged, "some channels must keep their version"
    for channel in unchanged:
        assert second["channel_versions"][channel] == first["channel_versions"][channel]
    for channel in new_versions:
        assert second["channel_versions"][channel] == first["channel_versions"][channel] + 1
    assert second["id"] > first["id"]


def test_message_list_grows_then_keeps_its_window():
    thread = ChatThread("w", _versions, DocumentPool(count=1))
    for _ in range(MESSAGE_WINDOW + 5):
        checkpoint, _, _ = thread.advance()
        thread.commit(checkpoint, thread.config)
    messages = checkpoint["channel_values"]["messages"]
    assert len(messages) == MESSAGE_WINDOW
    assert messages[-1]["id"] == f"w-m{MESSAGE_WINDOW + 4}"
    assert all(280 <= len(m["content"]) + 40 <= 320 for m in messages)


def test_percentile_and_throughput():
    values = [i * 1_000_000 for i in range(1, 101)]  # 1..100 ms
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([5_000_000], 99) == 5.0
    assert round(ops_per_second([500_000_000, 500_000_000]), 6) == 2.0


def test_raw_sqlite_floor_round_trip_and_delete():
    floor = RawSqlFloor(sqlite3.connect(":memory:"), sqlite=True)
    thread = ChatThread("f", floor.get_next_version, DocumentPool(count=1))
    ids = []
    for _ in range(3):
        checkpoint, metadata, new_versions = thread.advance()
        stored = floor.put(thread.config, checkpoint, metadata, new_versions)
        thread.commit(checkpoint, stored)
        writes, task_id = thread.writes()
        floor.put_writes(stored, writes, task_id)
        ids.append(checkpoint["id"])
    latest_id, body, metadata = floor.get_tuple({"configurable": {"thread_id": "f"}})
    assert latest_id == ids[-1] and metadata["step"] == 2
    assert "messages" in body["channel_values"]
    by_id = floor.get_tuple({"configurable": {"thread_id": "f", "checkpoint_id": ids[0]}})
    assert by_id[0] == ids[0]
    assert [row[0] for row in floor.list({"configurable": {"thread_id": "f"}}, limit=2)] == [
        ids[2],
        ids[1],
    ]
    floor.delete_thread("f")
    assert floor.get_tuple({"configurable": {"thread_id": "f"}}) is None
    assert floor.conn.execute("SELECT COUNT(*) FROM raw_writes").fetchone()[0] == 0


def test_payload_bytes_counts_nested_bytes_and_text():
    assert payload_bytes({"a": (b"xyz", ["hé"])}) == 1 + 3 + 3


def test_same_seed_gives_equal_threads_under_different_ids():
    docs = DocumentPool(count=3)
    a = ChatThread("deep-a", _versions, docs, seed="deep")
    b = ChatThread("deep-b", _versions, docs, seed="deep")
    for _ in range(30):
        ca, _, va = a.advance()
        cb, _, vb = b.advance()
        assert set(va) == set(vb)
        assert len(ca["channel_values"]["document"]) == len(cb["channel_values"]["document"])
        a.commit(ca, a.config)
        b.commit(cb, b.config)


def test_heavy_thread_keeps_every_message_and_a_document_every_8_steps():
    from bench.workload import HEAVY

    thread = ChatThread("h", _versions, DocumentPool(count=2), shape=HEAVY)
    documents = []
    for step in range(200):
        checkpoint, _, new_versions = thread.advance()
        thread.commit(checkpoint, thread.config)
        if DOCUMENT_CHANNEL in new_versions:
            documents.append(step)
    assert documents == list(range(0, 200, 8))
    messages = checkpoint["channel_values"]["messages"]
    assert len(messages) == 200 and messages[0]["id"] == "h-m0"
    # The untrimmed list passes INLINE_COMPRESS_BYTES (64 KB) before the thread ends.
    from checkpoints.codec.serde import StoreSerializer

    assert len(StoreSerializer().dumps_typed(messages)[1]) > 64 * 1024


def test_floor_saver_commits_one_row_a_call_and_runs_a_graph_turn(tmp_path):
    from bench.floor import sqlite_floor
    from bench.graph import STEPS, build_graph, run_turn

    floor = sqlite_floor(str(tmp_path / "floor.sqlite3"))
    result = run_turn(build_graph(floor), "floor-test", 0)
    assert len(result["messages"]) == 1 + STEPS
    rows = sqlite3.connect(tmp_path / "floor.sqlite3").execute("SELECT COUNT(*) FROM floor")
    # A put for the input and for each step, and each task's writes: about two a step.
    assert rows.fetchone()[0] >= 2 * STEPS


def test_the_memory_floor_keeps_a_call_a_row_and_the_user_asks_questions():
    from bench.floor import memory_floor
    from bench.graph import QUESTION, STEPS, build_graph, run_turn

    floor = memory_floor()
    result = run_turn(build_graph(floor), "floor-test", 0)
    assert result["messages"][0]["content"] == QUESTION and QUESTION.endswith("?")
    assert len(floor.kept) >= 2 * STEPS
    thread = ChatThread("q", floor.get_next_version, DocumentPool(count=1))
    asked = []
    for _ in range(4):
        checkpoint, _, _ = thread.advance()
        thread.commit(checkpoint, thread.config)
        asked.append(checkpoint["channel_values"]["messages"][-1])
    assert [m["content"][-1] for m in asked] == ["?", ".", "?", "."]
    assert [m["type"] for m in asked] == ["human", "ai", "human", "ai"]


def test_concurrency_sampler_keeps_the_peak_and_every_connection_seen_per_window(monkeypatch):
    import os

    # bench.concurrency points DJANGO_SETTINGS_MODULE at bench.settings on import: undone.
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", ""))
    from bench.concurrency import PeakSampler, latency_summary

    script = iter([{"a": {1, 2}}, {"a": {2, 3, 4}, "b": {9}}, {"a": {5}}])
    sampler = PeakSampler(lambda: next(script))
    sampler.sample()
    sampler.sample()
    peak, seen = sampler.take()
    assert peak == {"a": 3, "b": 1} and seen == {"a": {1, 2, 3, 4}, "b": {9}}
    sampler.sample()  # a new window: the first one's peak does not carry over
    assert sampler.take() == ({"a": 1}, {"a": {5}})
    sampler.sample()  # a failed sample is noted, not raised
    assert sampler.errors and sampler.take() == ({}, {})
    assert latency_summary([i * 1_000_000 for i in range(1, 201)]) == (100.0, 198.0)


def test_live_thread_keeps_every_message_changes_three_or_four_channels_and_writes_three():
    from bench.workload import LIVE, WRITE_CHANNELS

    thread = ChatThread("l", _versions, DocumentPool(count=2), shape=LIVE)
    documents = []
    for step in range(40):
        checkpoint, _, new_versions = thread.advance()
        thread.commit(checkpoint, thread.config)
        if DOCUMENT_CHANNEL in new_versions:
            documents.append(step)
        small = set(new_versions) & set(SMALL_CHANNELS)
        if step == 0:
            assert small == set(SMALL_CHANNELS)
        else:
            assert 3 <= len(small) <= 4
        writes, task_id = thread.writes()
        assert [channel for channel, _ in writes] == list(WRITE_CHANNELS[:3])
        assert writes[0][1] == thread.messages[-1] and task_id.endswith(f"-{step}")
    assert documents == list(range(0, 40, 8))
    # A dict, not a string, so PostgresSaver keeps it as a blob (workload.LIVE).
    assert set(checkpoint["channel_values"][DOCUMENT_CHANNEL]) == {"text"}
    messages = checkpoint["channel_values"]["messages"]
    # Never trimmed: every message since step 0, each about 300 bytes.
    assert len(messages) == 40 and messages[0]["id"] == "l-m0"
    assert all(280 <= len(m["content"]) + 40 <= 320 for m in messages)


def test_live_bench_writes_round_robin_with_put_writes_after_each_put(monkeypatch):
    import dataclasses
    import os

    # bench.run points DJANGO_SETTINGS_MODULE at bench.settings on import: undone.
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", ""))
    from langgraph.checkpoint.memory import InMemorySaver

    from bench.measure import Samples
    from bench.run import QUICK, Bench, LiveBench
    from bench.subjects import Subject

    calls = []

    class Recording(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            calls.append(("put", config["configurable"]["thread_id"], checkpoint["id"]))
            return super().put(config, checkpoint, metadata, new_versions)

        def put_writes(self, config, writes, task_id, task_path=""):
            conf = config["configurable"]
            calls.append(("writes", conf["thread_id"], conf["checkpoint_id"], len(writes)))
            return super().put_writes(config, writes, task_id, task_path)

    plan = dataclasses.replace(
        QUICK,
        deep=6,
        live_threads=3,
        live_steps=2,
        live_gets=1,
        live_lists=1,
        live_turns=3,
        live_graph_threads=2,
    )
    subject = Subject("rec", "memory", Recording(), lambda: 0, lambda: 0)
    live = LiveBench(Bench(plan, [subject], DocumentPool(count=1), Samples()), Samples())
    live.prepare()
    # The deep read thread grew among the live ones: one live step between each of its steps.
    seeded = [c[1] for c in calls if c[0] == "put"][: 2 * plan.deep]
    assert seeded[0::2] == ["ldeep-rec"] * plan.deep
    assert seeded[1::2] == ["llive0-rec", "llive1-rec", "llive2-rec"] * 2
    calls.clear()
    live.round(0, subject)
    bench_calls = [c for c in calls if c[1].startswith("llive")]
    puts = [c for c in bench_calls if c[0] == "put"]
    # Round-robin: every thread's step before any thread's next one.
    assert [c[1] for c in puts] == ["llive0-rec", "llive1-rec", "llive2-rec"] * plan.live_steps
    # Each put is followed at once by its task's three writes against that checkpoint.
    for put, writes in zip(bench_calls[0::2], bench_calls[1::2], strict=True):
        assert put[0] == "put" and writes == ("writes", put[1], put[2], 3)
    assert len(live.samples.get("rec", "put")) == len(live.samples.get("rec", "put_writes")) == 6
    # Graph turns round-robin over threads that keep their turns; saver CPU counted per turn.
    assert len(live.samples.get("rec", "e2e")) == plan.live_turns
    assert live.samples.cpu["rec"][0] == plan.live_turns and live.turns["rec"] == [2, 1]
    # The counting wrappers are gone after each turn.
    assert "put" not in vars(subject.saver)


def test_saver_cpu_counts_calls_and_restores_the_methods():
    from langgraph.checkpoint.memory import InMemorySaver

    from bench.graph import build_graph, run_turn
    from bench.measure import SaverCpu

    saver = InMemorySaver()
    graph = build_graph(saver)
    meter = SaverCpu()
    with meter.counting(saver):
        run_turn(graph, "cpu", 0, durability=None)
    assert meter.spent["put"][0] >= 10 and meter.spent["get_tuple"][0] >= 1
    assert meter.spent["put_writes"][0] >= 1
    assert not {"put", "put_writes", "get_tuple"} & set(vars(saver))


def test_sweep_seed_kinds_mark_the_share_due_in_runs_or_scattered():
    from bench.sweep_seed import kind_of

    mixed = [kind_of(i, None, False) for i in range(1000)]
    assert mixed[:10] == list(range(10))
    for scatter in (False, True):
        kinds = [kind_of(i, 90, scatter) for i in range(10_000)]
        assert set(kinds) == {0, 7}  # finished past due, or fresh
        due = kinds.count(0)
        assert (due == 9_000) if not scatter else (8_800 < due < 9_200)
    runs = [kind_of(i, 90, False) for i in range(100)]
    assert runs == [0] * 90 + [7] * 10
    scattered = [kind_of(i, 90, True) for i in range(100)]
    assert scattered != runs and scattered == [kind_of(i, 90, True) for i in range(100)]
