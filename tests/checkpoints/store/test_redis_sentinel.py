"""The Redis saver behind Redis Sentinel (a master, a replica, three sentinels; started here)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from checkpoints.store.registry import get_saver
from tests.checkpoints.store.test_from_conn_string import check_interrupt_and_resume
from tests.reliability_fixtures import failover_writer, put_value, wait_for, write_batch

pytestmark = pytest.mark.redis


@pytest.fixture(params=["redis-sentinel"])
def provider(request):
    return request.param


def test_the_sentinels_master_is_the_store(store, redis_sentinel):
    assert store.address.startswith("sentinel 127.0.0.1:") and "'cpmaster'" in store.address
    stored = put_value(store, "t", None, {"a": 1})
    assert store.get_tuple(stored).checkpoint["channel_values"] == {"a": 1}
    assert store.client.connection_pool.get_master_address()[1] == redis_sentinel.master


def test_a_graph_interrupts_and_resumes_through_from_conn_string(store, tmp_path):
    check_interrupt_and_resume(store.url, tmp_path, same_process=False)


def test_eight_concurrent_writers_every_acknowledged_checkpoint_reads_back(store):
    acknowledged: list = []
    failures: list = []

    def writer(n: int) -> None:
        try:
            saver = get_saver("redis", conn_string=store.url)
            acknowledged.extend(write_batch(saver, f"w{n}", [f"w{n}", "shared"], 40))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            failures.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert not failures, failures
    assert len(acknowledged) == 8 * 40
    for config, values in acknowledged:
        assert store.get_tuple(config).checkpoint["channel_values"] == values


def test_a_killed_master_fails_over_and_nothing_acknowledged_is_lost(store, redis_sentinel):
    """Kill the master mid-write: the sentinels promote the replica, writes go on there.

    The default saver rides the failover out on its bounded retries; one built with
    ``?retries=0`` meets a StoreUnavailable naming the sentinels in between.
    """
    patient = get_saver("redis", conn_string=store.url)
    impatient = get_saver("redis", conn_string=store.url + "?retries=0")
    acked: dict[str, list] = {"patient": [], "impatient": []}
    unavailable: list = []
    failures: list = []
    stop = threading.Event()
    threads = [f"fo-{i}" for i in range(4)]

    def writer(name: str, saver) -> None:
        failover_writer(
            name,
            saver,
            threads,
            stop=stop,
            acked=acked,
            unavailable=unavailable,
            failures=failures,
            gone="the master did not come back",
        )

    workers = [
        threading.Thread(target=writer, args=("patient", patient)),
        threading.Thread(target=writer, args=("impatient", impatient)),
    ]
    for w in workers:
        w.start()
    old = redis_sentinel.master
    try:
        wait_for(lambda: min(len(v) for v in acked.values()) >= 50 or failures, 30)
        killed_at = time.monotonic()
        redis_sentinel.kill(old)
        wait_for(lambda: redis_sentinel.current_master() == redis_sentinel.replica, 60)
        after = lambda name: sum(1 for t, _, _ in acked[name] if t > killed_at)  # noqa: E731
        wait_for(lambda: min(after(n) for n in acked) >= 50 or failures, 60)
    finally:
        stop.set()
        for w in workers:
            w.join(60)
    assert not failures, failures
    assert unavailable, "the impatient writer never met the failover"
    assert "sentinel 127.0.0.1:" in str(unavailable[0])
    for name, items in acked.items():
        for _, config, values in items:
            got = patient.get_tuple(config)
            assert got is not None, (name, config)
            assert got.checkpoint["channel_values"] == values
