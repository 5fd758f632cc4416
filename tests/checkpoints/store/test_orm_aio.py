"""The ORM saver's native async paths on PostgreSQL (issue 21).

Async calls run their statements on psycopg's AsyncConnectionPool, one per event loop,
so one call waiting on the database does not hold up the others on the same loop; where
the native path would behave differently the call still runs in Django's sync thread.
"""

from __future__ import annotations

import asyncio
import gc
import time

import psycopg
import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from checkpoints.store.postgres import pool
from checkpoints.store.postgres.pool import _conninfo
from tests.store_helpers import config_for, make_saver, watch_pgwire

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", "pg"]),
]

# A hang guard only: a call queued behind the blocked one would never finish.
GUARD = 120


@pytest.fixture
def pg(request):
    return make_saver(request, "postgres")


async def _until_waiting_on_a_lock(dsn: str) -> None:
    """Return once some session of the test database waits on a row lock."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        while True:
            cur = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if (await cur.fetchone())[0]:
                return
            await asyncio.sleep(0.02)


def test_a_call_waiting_on_the_database_does_not_hold_up_the_others(pg):
    held = pg.put(config_for("held", ns=""), empty_checkpoint(), {}, {})
    free = pg.put(config_for("free", ns=""), empty_checkpoint(), {}, {})
    dsn = _conninfo(connections["pg"].settings_dict)
    second = create_checkpoint(empty_checkpoint(), None, 1)

    async def scenario(locker) -> None:
        # The put of "held" waits for the thread row another transaction has locked...
        blocked = asyncio.create_task(pg.aput(held, second, {}, {}))
        await asyncio.wait_for(_until_waiting_on_a_lock(dsn), GUARD)
        # ...while a read and a write of another thread, on the same loop, go through.
        found = await asyncio.wait_for(pg.aget_tuple(config_for("free", ns="")), GUARD)
        assert found.config["configurable"]["checkpoint_id"] == cid(free)
        await asyncio.wait_for(pg.aput_writes(free, [("ch", "v")], "task"), GUARD)
        assert not blocked.done()
        await locker.rollback()
        await asyncio.wait_for(blocked, GUARD)

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as locker:
            await locker.execute(
                "SELECT 1 FROM checkpoints_thread WHERE thread_id = 'held' FOR UPDATE"
            )
            await scenario(locker)

    asyncio.run(main())
    assert pg.get_tuple(config_for("held", ns="")).checkpoint["id"] == second["id"]
    assert pg.get_tuple(free).pending_writes == [("task", "ch", "v")]


def cid(config) -> str:
    return config["configurable"]["checkpoint_id"]


def _server_backends(dsn: str) -> dict[int, str]:
    """The test database's other client backends: pid -> the last statement they ran."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(
            conn.execute(
                "SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND application_name = ''"
            ).fetchall()
        )


def test_each_event_loop_gets_its_own_pool_and_closed_loops_let_theirs_go(pg):
    dsn = _conninfo(connections["pg"].settings_dict)
    written = []

    async def burst(i: int):
        # Several at once, so the loop's pool opens more than one connection.
        return await asyncio.gather(
            *(
                pg.aput(config_for(f"loop{i}-{k}", ns=""), empty_checkpoint(), {}, {})
                for k in range(4)
            )
        )

    pool.close_pools()  # earlier tests' loops: their connections too
    before = set(_server_backends(dsn))
    gc.disable()  # closed loops' connections must go without the garbage collector's help
    try:
        for i in range(3):
            written += asyncio.run(burst(i))
            mine = [entry for key, entry in pool._async_pools.items() if key[0] == "pg"]
            # A new loop's pool replaced those of the loops asyncio.run closed...
            assert len(mine) == 1
            # ...and the end of asyncio.run closed this loop's own: its connections left
            # the server with the loop, not when the next loop asked for a pool.
            assert mine[0][2] and all(conn.closed for conn in mine[0][2])
            # A backend leaves pg_stat_activity a moment after its client hangs up.
            for _ in range(100):
                backends = {p: q for p, q in _server_backends(dsn).items() if p not in before}
                if all(q == "" for q in backends.values()):
                    break
                time.sleep(0.05)
            # The pool may still have been opening a connection when asyncio.run cancelled
            # its tasks: psycopg drops that half-made connection, which never ran a
            # statement and never joined a pool, to the garbage collector.
            assert all(q == "" for q in backends.values()), backends
    finally:
        gc.enable()
    for config in written:
        assert pg.get_tuple(config).config == config


def test_async_delete_thread_removes_the_thread_whole(pg):
    config = pg.put(config_for("doomed", ns=""), empty_checkpoint(), {}, {})
    pg.put_writes(config, [("ch", "v")], "task")

    async def main():
        await pg.adelete_thread("doomed")
        return [item async for item in pg.alist(config_for("doomed", ns=""))]

    assert asyncio.run(main()) == []
    assert pg.thread_holdings("doomed").empty


def test_asyncio_run_returns_while_the_pool_is_still_opening_a_connection(tmp_path):
    """A script's loop ends while the pool's worker is still connecting (to a server that
    never answers here; under load, to a slow one): asyncio.run must return, not hang."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from tests.standalone import plain_env

    script = Path(__file__).resolve().parents[2] / "scripts" / "async_pool_shutdown.py"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the kernel; nothing ever answers them
        port = silent.getsockname()[1]
        try:
            done = subprocess.run(
                [sys.executable, str(script), str(port)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
                env=plain_env(),
            )
        except subprocess.TimeoutExpired as hung:
            pytest.fail(f"asyncio.run never returned: {hung.stdout!r} {hung.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "no connection in time, as the server never answers",
        "asyncio.run returned",
    ], done.stdout


@pytest.fixture
def sent(pg, monkeypatch) -> list[str]:
    """The statements the saver sends (sync and async, on its cursors and through
    `pgwire`), in order."""

    seen: list[str] = []
    execute, aexecute = pg._execute, pg._aexecute

    def counted(cur, sql, params, **options):
        seen.append(sql)
        return execute(cur, sql, params, **options)

    async def acounted(cur, sql, params, **options):
        seen.append(sql)
        return await aexecute(cur, sql, params, **options)

    monkeypatch.setattr(pg, "_execute", counted)
    monkeypatch.setattr(pg, "_aexecute", acounted)
    watch_pgwire(monkeypatch, lambda conn, statement, options: seen.append(statement.sql))
    return seen


def test_delete_thread_is_one_statement_that_takes_the_finished_mark_too(pg, sent):
    """PostgreSQL deletes a thread, its rows and its finished-mark in one statement (one
    round trip, one commit), sync and async alike."""
    from datetime import UTC, datetime, timedelta

    due = datetime.now(UTC) + timedelta(days=1)
    for name, delete in (
        ("sync-doomed", pg.delete_thread),
        ("async-doomed", lambda t: asyncio.run(pg.adelete_thread(t))),
    ):
        config = pg.put(config_for(name, ns=""), empty_checkpoint(), {}, {})
        pg.put_writes(config, [("ch", "v")], "task")
        pg.mark_finished(name, due)
        sent.clear()
        delete(name)
        assert len(sent) == 1 and "checkpoints_finishedmark" in sent[0], sent
        assert pg.thread_holdings(name).empty
        assert pg.finished_mark(name) is None
        assert pg.get_tuple(config_for(name, ns="")) is None


def test_writes_before_the_first_checkpoint_make_the_thread_in_the_same_statement(pg, sent):
    """LangGraph may store a run's input writes before the thread's first checkpoint: the
    one statement makes the thread row too (the ORM detour opened a Django connection on
    each of LangGraph's worker threads), sync and async alike."""
    first = empty_checkpoint()
    for name, put_writes in (
        ("sync-new", pg.put_writes),
        ("async-new", lambda *a: asyncio.run(pg.aput_writes(*a))),
    ):
        config = config_for(name, first["id"], ns="")
        sent.clear()
        with CaptureQueriesContext(connections["pg"]) as orm:
            put_writes(config, [("messages", "hello"), ("route", "start")], "input-task")
        assert len(sent) == 1 and not orm.captured_queries, (sent, orm.captured_queries)
        assert pg.thread_holdings(name).writes == 2
        # Written again (a retried task): the slots are kept, nothing fails.
        put_writes(config, [("messages", "other"), ("route", "other")], "input-task")
        pg.put(config_for(name, ns=""), first, {}, {})
        found = pg.get_tuple(config)
        assert found.pending_writes == [
            ("input-task", "messages", "hello"),
            ("input-task", "route", "start"),
        ]
