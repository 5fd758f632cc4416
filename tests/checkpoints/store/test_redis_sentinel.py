"""The Redis saver behind Redis Sentinel (a master, a replica, three sentinels; started here)."""

from __future__ import annotations

import time

import pytest

from tests.reliability_fixtures import (
    FailoverWriters,
    assert_reads_back,
    concurrent_writers,
    put_value,
    wait_for,
)
from tests.standalone import check_interrupt_and_resume

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
    acknowledged = concurrent_writers(store.url, lambda n: [f"w{n}", "shared"], 40)
    assert_reads_back(store, acknowledged)


def test_a_killed_master_fails_over_and_nothing_acknowledged_is_lost(store, redis_sentinel):
    """Kill the master mid-write: the sentinels promote the replica, writes go on there.

    The default saver rides the failover out on its bounded retries; one built with
    ``?retries=0`` meets a StoreUnavailable naming the sentinels in between.
    """
    writers = FailoverWriters(
        store.url, [f"fo-{i}" for i in range(4)], gone="the master did not come back"
    )
    writers.start()
    try:
        wait_for(lambda: writers.each_wrote(50), 30)
        killed_at = time.monotonic()
        redis_sentinel.kill(redis_sentinel.master)
        wait_for(lambda: redis_sentinel.current_master() == redis_sentinel.replica, 60)
        wait_for(lambda: writers.each_wrote(50, since=killed_at), 60)
    finally:
        writers.finish()
    writers.assert_nothing_lost("sentinel 127.0.0.1:")
