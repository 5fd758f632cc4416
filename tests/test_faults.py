"""Injected faults: a PostgreSQL backend killed mid-put, a Redis server restarted between
calls, a sweep interrupted half-way. Each must fail clearly, leave nothing half-written,
and let the same saver (or the next sweep) carry on."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from checkpoints.errors import StoreUnavailable
from checkpoints.store.planning import utcnow
from retention.errors import LiveFilterFailed, SweepFailed
from retention.models import SweepRun
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.private_servers import RedisServer
from tests.reliability_fixtures import put_value
from tests.retention_fixtures import holds
from tests.services import need_service
from tests.store_helpers import IN_PROCESS, config_for

WAIT_SECONDS = 30


# -- PostgreSQL backend terminated while a put is in flight ---------------------------------
def _admin_connection(alias: str) -> psycopg.Connection:
    entry = connections[alias].settings_dict
    return psycopg.connect(
        host=entry["HOST"] or "127.0.0.1",
        port=entry["PORT"] or 5432,
        user=entry["USER"] or None,
        dbname=entry["NAME"],
        autocommit=True,
    )


def _blocked_backend(admin: psycopg.Connection, locker_pid: int) -> int:
    """The pid of the backend waiting on the locker's row lock (the saver's put)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            [locker_pid],
        ).fetchone()
        if row:
            return row[0]
        time.sleep(0.05)
    raise AssertionError(f"no put blocked on the row lock within {WAIT_SECONDS}s")


def _kill_mid_put(saver) -> dict:
    """Put on a thread whose row another session holds, kill the put's backend, put again.

    Both puts run on one worker thread, so the second uses the same Django connection.
    Returns the first put's error (or "acknowledged") and the second put's result or error.
    """
    first = put_value(saver, "victim", None, {"n": 0})
    outcome: dict = {}

    def writer() -> None:
        try:
            try:
                put_value(saver, "victim", first, {"n": 1, "blob": "doomed"})
                outcome["first"] = "acknowledged"
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                outcome["first"] = exc
            try:
                outcome["second"] = put_value(saver, "victim", first, {"n": 2})
            except Exception as exc:  # noqa: BLE001
                outcome["second"] = exc
        finally:
            connections.close_all()

    locker = _admin_connection(saver.using)
    admin = _admin_connection(saver.using)
    try:
        # Hold the thread row, so the put (which upserts that row) waits mid-flight.
        locker.autocommit = False
        locker.execute(
            "SELECT id FROM checkpoints_thread WHERE thread_id = %s FOR UPDATE", ["victim"]
        )
        worker = threading.Thread(target=writer, daemon=True)
        worker.start()
        victim_pid = _blocked_backend(admin, locker.info.backend_pid)
        admin.execute("SELECT pg_terminate_backend(%s)", [victim_pid])
        locker.rollback()
        worker.join(timeout=WAIT_SECONDS)
        assert not worker.is_alive(), "the put did not return after its backend was killed"
    finally:
        locker.close()
        admin.close()
    return outcome


PUT_PATHS = pytest.mark.parametrize(
    "max_checkpoints", [0, 50], ids=["one-statement", "transaction"]
)


@pytest.mark.parametrize("provider", ["postgres"])
@PUT_PATHS
def test_put_killed_mid_flight_fails_and_leaves_nothing(saver_factory, provider, max_checkpoints):
    saver = saver_factory(max_checkpoints=max_checkpoints)
    failed = _kill_mid_put(saver)["first"]
    assert isinstance(failed, Exception), "a put on a killed backend was acknowledged"
    assert "terminating connection" in str(failed), failed
    values = [t.checkpoint["channel_values"] for t in saver.list(config_for("victim", ns=""))]
    assert {"n": 1, "blob": "doomed"} not in values
    assert values[-1] == {"n": 0}
    assert saver.thread_holdings("victim").writes == 0


@pytest.mark.parametrize("provider", ["postgres"])
@pytest.mark.parametrize(
    "max_checkpoints",
    [0, 50],
    ids=["one-statement", "transaction"],
)
def test_same_worker_puts_again_after_its_backend_was_killed(
    saver_factory, provider, max_checkpoints
):
    saver = saver_factory(max_checkpoints=max_checkpoints)
    second = _kill_mid_put(saver)["second"]
    assert isinstance(second, dict), f"the put after the kill failed too: {second!r}"
    values = [t.checkpoint["channel_values"] for t in saver.list(config_for("victim", ns=""))]
    assert values == [{"n": 2}, {"n": 0}]


# -- Redis restarted between calls ----------------------------------------------------------
@pytest.fixture
def private_redis():
    server = RedisServer()
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        need_service(f"cannot start a private redis-server: {exc}")
    yield server
    server.stop()


def test_redis_restart_between_calls(private_redis):
    from checkpoints.store.registry import get_saver

    saver = get_saver("redis", conn_string=private_redis.url)
    stored = put_value(saver, "t", None, {"n": 1})
    assert saver.get_tuple(stored).checkpoint["channel_values"] == {"n": 1}

    private_redis.stop()
    address = f"127.0.0.1:{private_redis.port}"
    for call in (
        lambda: put_value(saver, "t", stored, {"n": 2}),
        lambda: saver.get_tuple(stored),
        lambda: list(saver.list(config_for("t", ns=""))),
        lambda: saver.delete_thread("t"),
    ):
        with pytest.raises(StoreUnavailable) as caught:
            call()
        assert address in str(caught.value), caught.value

    private_redis.start()
    # A restarted server without persistence is empty; the same saver writes and reads.
    again = put_value(saver, "t", None, {"n": 3})
    assert saver.get_tuple(again).checkpoint["channel_values"] == {"n": 3}
    assert [t.checkpoint["channel_values"] for t in saver.list(config_for("t", ns=""))] == [
        {"n": 3}
    ]


def test_redis_restart_then_a_new_saver_accepts_the_store(private_redis):
    from checkpoints.store.registry import get_saver

    saver = get_saver("redis", conn_string=private_redis.url)
    put_value(saver, "t", None, {"n": 1})
    private_redis.stop()
    with pytest.raises(StoreUnavailable):
        saver.get_tuple(config_for("t", ns=""))
    private_redis.start()
    again = put_value(saver, "t", None, {"n": 2})
    # A worker started after the restart (a new saver) must accept what the first one wrote.
    fresh = get_saver("redis", conn_string=private_redis.url)
    assert fresh.get_tuple(again).checkpoint["channel_values"] == {"n": 2}


def test_redis_restart_async_calls_recover(private_redis):
    import asyncio

    from checkpoints.store.registry import get_saver

    saver = get_saver("redis", conn_string=private_redis.url)

    async def scenario():
        stored = await saver.aget_tuple(config_for("t", ns=""))
        assert stored is None
        private_redis.stop()
        with pytest.raises(StoreUnavailable, match=str(private_redis.port)):
            await saver.aget_tuple(config_for("t", ns=""))
        private_redis.start()
        assert await saver.aget_tuple(config_for("t", ns="")) is None

    asyncio.run(scenario())


# -- a sweep interrupted half-way -----------------------------------------------------------
def _seed_sweep(store, doomed: int, live: int) -> None:
    past = utcnow() - timedelta(minutes=1)
    for i in range(doomed):
        put_value(store, f"doomed-{i}", None, {"n": i})
        store.mark_finished(f"doomed-{i}", past, "test")
    for i in range(live):
        put_value(store, f"live-{i}", None, {"n": i})
        store.mark_finished(f"live-{i}", past, "test")
    put_value(store, "unmarked", None, {"n": 0})


def _claim_live(thread_ids):
    return {t for t in thread_ids if t.startswith("live-")}


def _assert_finished_job(store, doomed: int, live: int) -> None:
    assert not any(holds(store, f"doomed-{i}") for i in range(doomed))
    for i in range(live):
        assert holds(store, f"live-{i}")
        assert store.finished_mark(f"live-{i}") is not None
    assert holds(store, "unmarked")


# The sweep's delete is killed or failed from inside (the in-process saver's
# delete_threads_unwritten, patched) to show the next sweep finishes it: the sweep runs where
# the store is, never in a worker.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_sweep_killed_after_some_deletes_is_finished_by_the_next(store):
    doomed, live = 7, 3
    _seed_sweep(store, doomed, live)
    register_live_thread_filter("test-live", _claim_live)
    real_delete = store.delete_threads_unwritten
    batches: list[list[str]] = []

    def dying_delete(judged):
        if len(batches) == 2:
            raise ConnectionError(f"injected: store went away before deleting {list(judged)!r}")
        kept = real_delete(judged)
        batches.append([t for t in judged if t not in kept])
        return kept

    store.delete_threads_unwritten = dying_delete
    with override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}):
        with pytest.raises(SweepFailed, match="injected") as failure:
            sweep_checkpoints(saver=store)
        assert isinstance(failure.value.__cause__, ConnectionError)
        del store.delete_threads_unwritten
        deleted = [t for batch in batches for t in batch]
        assert 0 < len(deleted) < doomed
        # The failed run's record counts exactly what it deleted.
        failed = SweepRun.objects.get()
        assert (failed.status, failed.swept_count) == ("failed", len(deleted))
        assert "ConnectionError: injected" in failed.error and failed.finished_at
        assert all(t.startswith("doomed-") for t in deleted)
        assert sum(holds(store, f"doomed-{i}") for i in range(doomed)) == doomed - len(deleted)

        result = sweep_checkpoints(saver=store)
    assert result.finished_swept == doomed - len(deleted)
    assert {s["thread_id"] for s in result.spared} == {f"live-{i}" for i in range(live)}
    _assert_finished_job(store, doomed, live)


# The sweep's delete is killed or failed from inside (the in-process saver's
# delete_threads_unwritten, patched) to show the next sweep finishes it: the sweep runs where
# the store is, never in a worker.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_sweep_stopped_by_a_failing_filter_mid_way_is_finished_by_the_next(store):
    doomed, live = 6, 2
    _seed_sweep(store, doomed, live)
    calls = {"n": 0}

    def flaky(thread_ids):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("injected: the run registry timed out")
        return _claim_live(thread_ids)

    register_live_thread_filter("test-live", flaky)
    batch = {**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}
    with override_settings(CHECKPOINTS=batch):
        with pytest.raises(LiveFilterFailed, match="test-live"):
            sweep_checkpoints(saver=store)
        left = [i for i in range(doomed) if holds(store, f"doomed-{i}")]
        assert 0 < len(left) < doomed
        for i in range(live):
            assert holds(store, f"live-{i}")
        register_live_thread_filter("test-live", _claim_live)
        result = sweep_checkpoints(saver=store)
    assert result.finished_swept == len(left)
    _assert_finished_job(store, doomed, live)
