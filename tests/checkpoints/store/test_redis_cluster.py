"""The Redis saver on a real private Redis Cluster (3 masters + 3 replicas, started here).

The sweep's rules run on the cluster too, among the providers of tests/retention/test_sweep.py
and test_sweep_written_during.py; here: the settings path, slots, a graph through
``from_conn_string``, 8 concurrent writers, three concurrent sweeps, a master killed
mid-write.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from checkpoints.store.planning import utcnow
from checkpoints.store.planning.format import FORMAT_GENERATION
from checkpoints.store.redis.keys import DUE_KEY, FORMAT_KEY, MARKS_KEY, REGISTRY_KEY
from checkpoints.store.registry import get_saver
from retention.errors import SweepAlreadyRunning
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.reliability_fixtures import (
    FailoverWriters,
    assert_reads_back,
    concurrent_writers,
    put_value,
    wait_for,
)
from tests.retention_fixtures import finished_past_due, holds
from tests.standalone import check_interrupt_and_resume
from tests.store_helpers import config_for

pytestmark = pytest.mark.redis


@pytest.fixture(params=["redis-cluster"])
def provider(request):
    return request.param


def test_the_settings_conn_string_builds_cluster_clients(store):
    import redis.asyncio.cluster
    import redis.cluster

    conf = {**settings.CHECKPOINTS, "PROVIDER": "redis", "CONN_STRING": store.url}
    with override_settings(CHECKPOINTS=conf):
        saver = get_saver()
    assert isinstance(saver.client, redis.cluster.RedisCluster)
    stored = put_value(saver, "t", None, {"a": 1})

    async def read():
        assert isinstance(saver._aclient(), redis.asyncio.cluster.RedisCluster)
        return await saver.aget_tuple(config_for("t", ns=""))

    import asyncio

    assert asyncio.run(read()).config == stored
    assert saver.address.startswith("cluster 127.0.0.1:")


def test_the_async_path_checks_the_store_again_after_a_lost_connection(store):
    import asyncio

    stored = put_value(store, "t", None, {"a": 1})
    store._ready = False  # what a connection error leaves behind

    async def read():
        return await store.aget_tuple(config_for("t", ns=""))

    assert asyncio.run(read()).config == stored
    assert store._ready and store.durability == "memory"


def test_a_threads_keys_share_a_slot_and_store_wide_keys_share_another(store):
    for i in range(20):
        stored = put_value(store, f"thread-{i}", None, {"i": i})
        store.put_writes(stored, [("i", i)], "task")
    store.mark_finished("thread-0", utcnow())
    client = store.client
    keys = list(client.scan_iter(match="cp:*"))
    slots: dict[bytes, set[int]] = {}
    for key in keys:
        slots.setdefault(key.split(b"}")[0], set()).add(client.keyslot(key))
    assert all(len(s) == 1 for s in slots.values()), slots
    assert len(slots) == 21  # 20 threads and the store-wide {cp}
    wide = {client.keyslot(k) for k in (FORMAT_KEY, REGISTRY_KEY, DUE_KEY, MARKS_KEY)}
    assert len(wide) == 1
    # The threads spread over more than one master.
    masters = {client.get_node_from_key(k).port for k in keys}
    assert len(masters) > 1


def test_marks_copy_delete_and_reset_on_the_cluster(store):
    stored = put_value(store, "a", None, {"v": 1})
    store.put_writes(stored, [("v", 2)], "task")
    now = utcnow()
    store.mark_finished("a", now)
    assert [e.thread_id for e in store.finished_due(now + timedelta(seconds=1))] == ["a"]
    store.copy_thread("a", "b")
    assert store.get_tuple(config_for("b", ns="")).checkpoint["channel_values"] == {"v": 1}
    assert sorted(store.threads()) == ["a", "b"]
    store.delete_thread("a")
    assert store.threads() == ["b"] and store.get_tuple(config_for("a", ns="")) is None
    assert store.finished_mark("a") is None  # a deleted thread's mark goes with it
    store.mark_finished("b", now)
    assert store.unmark_finished("b") is True and store.finished_mark("b") is None
    assert store.reset_store() == 1
    assert store.get_tuple(config_for("b", ns="")) is None
    assert store.client.get(FORMAT_KEY) == str(FORMAT_GENERATION).encode()


def test_the_durability_stamp_is_the_weakest_masters(store, redis_cluster):
    def fsync(port: int, value: str) -> None:
        redis_cluster.cli(port, "config", "set", "appendfsync", value)

    masters = redis_cluster.masters()
    assert store.durability == "memory"  # every master fsyncs once a second
    try:
        for port in masters:
            fsync(port, "always")
        every = get_saver("redis", conn_string=store.url)
        stored = put_value(every, "t", None, {"a": 1})
        assert every.get_durability(stored)["level"] == "disk"
        fsync(masters[-1], "everysec")
        assert get_saver("redis", conn_string=store.url).durability == "memory"
    finally:
        for port in masters:
            fsync(port, "everysec")


def test_the_format_check_works_on_the_cluster(store):
    from checkpoints.errors import CheckpointStoreFormatError

    assert store.client.get(FORMAT_KEY) == str(FORMAT_GENERATION).encode()
    store.client.set(FORMAT_KEY, "2")
    with pytest.raises(CheckpointStoreFormatError, match="generation 2"):
        get_saver("redis", conn_string=store.url)
    # Checkpoint keys without a format key, on any master: refused, not adopted.
    store.client.delete(FORMAT_KEY)
    store.client.hset("cp:{0123}:m", "id", "old")
    with pytest.raises(CheckpointStoreFormatError) as refused:
        get_saver("redis", conn_string=store.url)
    assert "cluster 127.0.0.1:" in str(refused.value)
    assert store.client.get(FORMAT_KEY) is None
    # Reset clears every master and records the generation.
    assert get_saver("redis", conn_string=store.url, check_format=False).reset_store() == 0
    assert store.client.get(FORMAT_KEY) == str(FORMAT_GENERATION).encode()
    assert list(store.client.scan_iter(match="cp:{0123}*")) == []
    get_saver("redis", conn_string=store.url)


def test_a_graph_interrupts_and_resumes_through_from_conn_string(store, tmp_path):
    check_interrupt_and_resume(store.url, tmp_path, same_process=False)


def test_eight_concurrent_writers_every_acknowledged_checkpoint_reads_back(store):
    acknowledged = concurrent_writers(store.url, lambda n: [f"w{n}-a", f"w{n}-b", "shared"], 60)
    assert_reads_back(store, acknowledged)
    assert len(list(store.list(None))) == 8 * 60
    assert len(store.threads()) == 17


def test_three_concurrent_sweeps_exactly_one_runs(store):
    now = utcnow()
    for thread_id in ("a", "b", "c"):
        finished_past_due(store, thread_id, now)
    refused: list = []
    results: list = []
    errors: list = []
    start = threading.Barrier(3)

    def hold_until_the_others_are_refused(thread_ids):
        # The sweep holding the lock waits here, so the other two meet it held.
        deadline = time.monotonic() + 30
        while len(refused) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return set()

    register_live_thread_filter("slow", hold_until_the_others_are_refused)

    def sweep():
        saver = get_saver("redis", conn_string=store.url)
        start.wait(30)
        try:
            results.append(sweep_checkpoints(saver=saver, now=now))
        except SweepAlreadyRunning as exc:
            refused.append(exc)
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)
        finally:
            connections.close_all()

    sweeps = [threading.Thread(target=sweep) for _ in range(3)]
    for s in sweeps:
        s.start()
    for s in sweeps:
        s.join(60)
    assert not errors, errors
    assert len(results) == 1 and len(refused) == 2
    assert results[0].finished_swept == 3
    assert not any(holds(store, t) for t in ("a", "b", "c"))
    assert "redis" in str(refused[0])
    # The lock is released: a later sweep runs.
    assert sweep_checkpoints(saver=store, now=now).swept_count == 0


def test_a_killed_master_fails_over_and_nothing_acknowledged_is_lost(store, redis_cluster):
    """Kill the master of the writers' threads mid-write: its replica takes over.

    The default saver, sync and async, rides the failover out on its bounded retries; one
    built with ``?retries=0`` meets a StoreUnavailable naming the cluster in between and retries
    itself. Every checkpoint either acknowledged reads back after.
    """
    from checkpoints.store.redis.keys import thread_prefix

    threads = [f"fo-{i}" for i in range(6)]
    victim = store.client.get_node_from_key(thread_prefix(threads[0]) + "m").port
    writers = FailoverWriters(store.url, threads, gone="the cluster did not come back")
    patient = writers.patient

    def wait(condition, seconds: float) -> None:
        wait_for(condition, seconds, why=lambda: f"; cluster nodes:\n{redis_cluster.nodes()}")

    def async_writer() -> None:
        # The same saver's asyncio path, its own cluster client, its bounded retries.
        import asyncio

        from langgraph.checkpoint.base import empty_checkpoint

        async def loop() -> None:
            parents: dict = dict.fromkeys(threads)
            seq = 0
            while not writers.stop.is_set():
                thread_id = threads[seq % len(threads)]
                values = {"writer": "async", "seq": seq}
                checkpoint = empty_checkpoint()
                versions = {k: patient.get_next_version(None, None) for k in values}
                checkpoint["channel_values"] = dict(values)
                checkpoint["channel_versions"] = dict(versions)
                stored = await patient.aput(
                    parents[thread_id] or config_for(thread_id, ns=""),
                    checkpoint,
                    {"step": seq},
                    versions,
                )
                parents[thread_id] = stored
                writers.acked["async"].append((time.monotonic(), stored, values))
                seq += 1

        asyncio.run(loop())

    writers.add("async", async_writer)
    writers.start()
    try:
        wait(lambda: writers.each_wrote(50), 30)
        killed_at = time.monotonic()
        redis_cluster.kill(victim)
        wait(
            lambda: victim not in redis_cluster.masters() and len(redis_cluster.masters()) == 3, 30
        )
        redis_cluster.wait_ok()
        wait(lambda: writers.each_wrote(50, since=killed_at), 60)
    finally:
        writers.finish()
        # The killed node comes back as a replica of the promoted one.
        redis_cluster.start_node(victim)
        redis_cluster.wait_ok()
        redis_cluster.wait_replicas_synced()
    writers.assert_nothing_lost("cluster 127.0.0.1:")
