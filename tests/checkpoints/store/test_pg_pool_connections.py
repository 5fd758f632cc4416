"""The pooled PostgreSQL saver keeps to its pool: a sync put on a fresh thread opens no
connection of the thread's own, and an event loop's pool is closed on the server when
``asyncio.run`` ends (both found by bench.concurrency's connection counts)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import psycopg
import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from checkpoints.store.postgres.pool import _conninfo
from tests.store_helpers import config_for, make_saver, put_chain

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", "pg"]),
]


@pytest.fixture
def pg(request, settings):
    # Every put would read the level again: the case where the read opened a connection.
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "DURABILITY_RECHECK_SECONDS": 0}
    saver = make_saver(request, "postgres")
    assert saver.pooled
    return saver


def test_a_sync_put_on_a_new_thread_opens_no_connection_of_its_own(pg):
    head = pg.put(config_for("pooled", ns=""), empty_checkpoint(), {}, {})
    opened: list[str] = []
    written: list[dict] = []

    def seen(sender, connection, **kwargs):
        opened.append(connection.alias)

    def put() -> None:
        try:
            written.append(pg.put(head, create_checkpoint(empty_checkpoint(), None, 1), {}, {}))
        finally:
            connections.close_all()

    connection_created.connect(seen)
    try:
        # LangGraph runs each put on a worker thread of its own, as this one.
        worker = threading.Thread(target=put)
        worker.start()
        worker.join(60)
    finally:
        connection_created.disconnect(seen)
    # The thread's own connection never opened; the stamp is the statement's own.
    assert opened == []
    assert pg.get_durability(written[0])["level"] == pg.durability


def _open_backends(dsn: str, pids: set[int]) -> set[int]:
    """Which of ``pids`` still have a backend on the server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)]
        ).fetchall()
    return {row[0] for row in rows}


def test_an_event_loops_pool_is_closed_when_the_loop_ends(pg):
    from checkpoints.store.postgres.pool import _async_pool_for

    dsn = _conninfo(connections["pg"].settings_dict)
    pids: set[int] = set()

    async def turns() -> None:
        # Concurrent puts grow the loop's pool past one connection.
        await asyncio.gather(
            *(pg.aput(config_for(f"loop-{i}", ns=""), empty_checkpoint(), {}, {}) for i in range(6))
        )
        # The loop's own connections, by backend: other pools of the test database (the
        # sync pool's upkeep, an earlier test's threads) may open and close theirs meanwhile.
        pool = await _async_pool_for(pg.using)
        pids.update(conn.info.backend_pid for conn in pool._pool)

    asyncio.run(turns())
    assert pids
    # A backend leaves pg_stat_activity a moment after its client hangs up: wait for it
    # (bounded), but never for the garbage collector or another event loop.
    gc.disable()
    try:
        for _ in range(100):
            if not _open_backends(dsn, pids):
                break
            time.sleep(0.05)
        assert not _open_backends(dsn, pids)
    finally:
        gc.enable()
    assert len(list(pg.list(None))) == 6


def test_the_pools_hand_out_the_connection_used_last(pg):
    """Calls in turn stay on one connection (its prepared statements and their plans kept),
    however many the pool holds; the one idle longest is the one a shrink closes."""
    from checkpoints.store.postgres.pool import _async_pool_for, _pool_for

    pool = _pool_for(pg.using)
    held = [pool.getconn() for _ in range(3)]
    for conn in held:
        pool.putconn(conn)
    assert len(pool._pool) >= 3
    newest, oldest = held[-1], held[0]
    for _ in range(5):
        with pool.connection() as conn:
            assert conn is newest
    # Idle longest at the end the pool shrinks from (connections earlier tests left idle
    # there may come before them), the one used last at the other.
    order = [id(conn) for conn in pool._pool]
    assert order.index(id(oldest)) < order.index(id(held[1])) < order.index(id(newest))
    assert pool._pool[-1] is newest
    # The saver's own calls in turn use one connection: prepared once, there.
    head = pg.put(config_for("lifo", ns=""), empty_checkpoint(), {}, {})
    for _ in range(4):
        pg.get_tuple(head)
    with pool.connection() as conn:
        assert conn is newest

    async def in_turn() -> set[int]:
        apool = await _async_pool_for(pg.using)
        taken = [await apool.getconn() for _ in range(3)]
        for conn in taken:
            await apool.putconn(conn)
        seen = set()
        for _ in range(5):
            async with apool.connection() as conn:
                seen.add(id(conn))
        return seen | {id(taken[-1])}

    assert len(asyncio.run(in_turn())) == 1


def test_a_pooled_connection_reads_without_a_cursor_and_holds_no_result_between(pg):
    """Reads, the put and the writes take no cursor (`postgres.sql`): a read's rows are
    loaded by one transformer the connection keeps; the statements still sent on a cursor
    keep one each; and an idle connection holds nothing a statement returned: a read of a
    large value leaves no copy of it behind in the pool."""
    from checkpoints.store.postgres.pool import _async_pool_for, _pool_for
    from checkpoints.store.postgres.sql import GET_BY_ID, PUT_BATCH

    big = "x" * 200_000
    head = put_chain(pg, "kept", {"doc": big})
    pg.put_writes(head, [("doc", big)], "task-1")
    assert pg.get_tuple(head).checkpoint["channel_values"]["doc"] == big
    assert [t.checkpoint["channel_values"]["doc"] for t in pg.list(head)] == [big]
    # A batch is one of the statements a cursor still sends.
    pg.put_many([(head, empty_checkpoint(), {}, {})], [])

    def results_held(conn) -> list:
        held = [
            c.pgresult
            for c in conn.__dict__.get("_checkpoints_cursors", {}).values()
            if c.pgresult is not None
        ]
        loader = conn.__dict__.get("_checkpoints_loader")
        return held + ([loader.pgresult] if loader is not None and loader.pgresult else [])

    pool = _pool_for(pg.using)
    with pool.connection() as conn:
        kept = dict(conn._checkpoints_cursors)
        loader = conn._checkpoints_loader
        assert list(kept) == [PUT_BATCH]
        assert results_held(conn) == []
    # Again: the same cursor and transformer, and still no result held once each call
    # has returned.
    pg.put_writes(head, [("doc", "y")], "task-2")
    assert pg.get_tuple(head).checkpoint["channel_values"]["doc"] == big
    pg.put_many([(head, empty_checkpoint(), {}, {})], [])
    with pool.connection() as conn:
        assert all(conn._checkpoints_cursors[sql] is cur for sql, cur in kept.items())
        assert conn._checkpoints_loader is loader
        assert results_held(conn) == []

    async def on_async_pool() -> list:
        tup = await pg.aget_tuple(head)
        assert tup.checkpoint["channel_values"]["doc"] == big
        apool = await _async_pool_for(pg.using)
        async with apool.connection() as conn:
            return [
                conn.__dict__.get("_checkpoints_cursors", {}),
                conn.__dict__.get("_checkpoints_loader"),
                results_held(conn),
            ]

    cursors, loader, held = asyncio.run(on_async_pool())
    assert GET_BY_ID not in cursors and loader is not None and held == []


def test_async_callers_past_the_pool_size_wait_at_its_gate_not_in_the_pool(pg, monkeypatch):
    """More concurrent calls than connections: each waits on the pool's semaphore, so the
    pool itself never queues anyone (its queue costs far more CPU a waiter); a caller that
    is cancelled while waiting gives its place back."""
    from checkpoints.store.postgres.pool import _async_pool_for

    monkeypatch.setenv("CHECKPOINTS_PG_POOL_SIZE", "2")

    async def crowd() -> tuple[dict, int, int]:
        pool = await _async_pool_for(pg.using)
        assert pool.max_size == 2
        # Both connections open first (held at once, so two are made): a checkout that
        # waits for one being opened queues in the pool, which is how it grows.
        held = [await pool.getconn(), await pool.getconn()]
        for conn in held:
            await pool.putconn(conn)
        assert pool.get_stats()["pool_available"] == 2
        pool.pop_stats()
        puts = [config_for(f"gate-{i}", ns="") for i in range(24)]
        await asyncio.gather(*(pg.aput(c, empty_checkpoint(), {}, {}) for c in puts))
        stats = pool.get_stats()
        # Waiters cancelled at the gate leave it whole.
        waiting = [
            asyncio.ensure_future(pg.aget_tuple(config_for(f"gate-{i}", ns=""))) for i in range(8)
        ]
        await asyncio.sleep(0)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        return stats, pool.gate._value, len([t async for t in pg.alist(None)])

    stats, free, listed = asyncio.run(crowd())
    assert stats.get("requests_queued", 0) == 0, stats
    assert stats["requests_num"] >= 24
    assert free == 2
    assert listed == 24


def test_an_async_caller_that_waits_past_the_pool_timeout_gets_store_unavailable(pg, monkeypatch):
    from checkpoints.errors import StoreUnavailable
    from checkpoints.store.postgres.pool import _async_pool_for

    monkeypatch.setenv("CHECKPOINTS_PG_POOL_SIZE", "1")

    async def starved() -> tuple[str, float]:
        pool = await _async_pool_for(pg.using)
        pool.timeout = 0.3
        await pool.gate.acquire()  # another caller holds the only connection
        started = time.monotonic()
        try:
            with pytest.raises(StoreUnavailable) as caught:
                await pg.aput(config_for("starved", ns=""), empty_checkpoint(), {}, {})
        finally:
            pool.gate.release()
        waited = time.monotonic() - started
        # Freed again, the same call goes through.
        await pg.aput(config_for("starved", ns=""), empty_checkpoint(), {}, {})
        return str(caught.value), waited

    message, waited = asyncio.run(starved())
    assert "'pg'" in message and "no free connection in checkpoints-async-pg" in message
    assert 0.25 <= waited < 5
    assert len(list(pg.list(config_for("starved", ns="")))) == 1


def test_a_statement_that_fails_in_a_transaction_hands_back_an_idle_connection(pg):
    """The cursor's connection goes back through putconn: one left in a transaction by a
    failure is rolled back there, and the next caller gets it idle, not checked out."""
    from checkpoints.store.postgres.pool import _pool_for, async_statement_cursor, statement_cursor

    head = pg.put(config_for("failing", ns=""), empty_checkpoint(), {}, {})
    pool = _pool_for("pg")

    def fail_inside_a_transaction(cursor_context):
        with pytest.raises(psycopg.errors.DivisionByZero):
            with cursor_context as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT 1 / 0")

    for _ in range(3):
        fail_inside_a_transaction(statement_cursor("pg", "SELECT 1 / 0"))
        with statement_cursor("pg", "SELECT txid_current_if_assigned()") as cur:
            # Still in the failed transaction, this would raise InFailedSqlTransaction.
            assert cur.execute("SELECT txid_current_if_assigned()").fetchone() == (None,)
            assert cur.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # A caller's own error before any statement is its own, not the cursor's.
    with pytest.raises(ValueError, match="before a statement"):
        with statement_cursor("pg", "SELECT 'never run'"):
            raise ValueError("before a statement")
    assert pool.get_stats()["pool_size"] == pool.get_stats()["pool_available"]

    async def failing_then_idle() -> None:
        async def fail() -> None:
            async with async_statement_cursor("pg", "SELECT 1 / 0") as cur:
                await cur.execute("BEGIN")
                await cur.execute("SELECT 1 / 0")

        for _ in range(3):
            with pytest.raises(psycopg.errors.DivisionByZero):
                await fail()
            async with async_statement_cursor("pg", "SELECT 2") as cur:
                await cur.execute("SELECT 2")
                assert await cur.fetchone() == (2,)
                status = cur.connection.info.transaction_status
                assert status == psycopg.pq.TransactionStatus.IDLE

    asyncio.run(failing_then_idle())
    # The store works on after both.
    assert pg.get_tuple(head).checkpoint["id"] == head["configurable"]["checkpoint_id"]
    assert pool.get_stats()["pool_size"] == pool.get_stats()["pool_available"]
