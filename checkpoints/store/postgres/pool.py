"""Shared PostgreSQL connections for the ORM saver's single-statement hot paths.

Django keeps one connection per thread, and LangGraph calls a saver from executor threads
it makes anew for every run, so each run paid for fresh connections. Statements that run
on their own (autocommit, outside any transaction the caller opened) borrow a connection
from one pool per database and process instead.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import weakref
from contextlib import asynccontextmanager, contextmanager

import psycopg
from django.db import connections

from checkpoints.errors import StoreUnavailable

_pools: dict[tuple, object] = {}
# (alias, database, pid, id(loop)) -> (the loop, weakly, its AsyncConnectionPool, the
# connections that pool opened, weakly, and the task that closes the pool with its loop).
_async_pools: dict[tuple, tuple[weakref.ref, object, weakref.WeakSet, asyncio.Task]] = {}
_lock = threading.Lock()
# (alias, pid) -> whether named server-side prepared statements may be used there.
_prepare_verdicts: dict[tuple[str, int], bool] = {}


def _conninfo(settings_dict: dict) -> str:
    parts = {
        "dbname": settings_dict.get("NAME") or "postgres",
        "user": settings_dict.get("USER") or None,
        "password": settings_dict.get("PASSWORD") or None,
        "host": settings_dict.get("HOST") or None,
        "port": str(settings_dict.get("PORT") or "") or None,
    }
    options = settings_dict.get("OPTIONS") or {}
    for key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "application_name", "options"):
        if options.get(key):
            parts[key] = options[key]
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in parts.items() if v is not None})


def _pool_size() -> int:
    return int(os.environ.get("CHECKPOINTS_PG_POOL_SIZE", "8"))


@functools.cache
def lifo(pool_class):
    """``pool_class`` handing out the connection returned last, not the one idle longest.

    psycopg_pool queues idle connections first in, first out, so even one thread's calls
    in turn rotate over every connection the pool holds, and each of them prepares and
    plans every statement again: PostgreSQL plans a prepared statement afresh for its
    first five runs on a connection (0.2 ms of a 0.9 ms delete_thread). Taking the newest
    keeps the work on the fewest connections (bench.run's delete_thread 0.51-0.61x ->
    0.88-0.94x PostgresSaver, chat e2e 0.74-0.81x -> 0.92-0.94x); the pool still closes
    the one idle longest when it shrinks. It takes a connection under its lock, so turning
    its queue there is safe. A psycopg_pool without that method keeps its own order
    (`test_pg_pool_connections` then fails, so an upgrade cannot drop this unseen).
    """
    if not hasattr(pool_class, "_get_ready_connection"):
        return pool_class

    class Lifo(pool_class):
        def _get_ready_connection(self, timeout):
            self._pool.rotate(1)  # the newest to the front; the oldest stays last to go
            return super()._get_ready_connection(timeout)

    Lifo.__name__ = Lifo.__qualname__ = f"Lifo{pool_class.__name__}"
    return Lifo


def _pool_for(alias: str):
    # The handler's settings (the dicts the wrappers hold): no thread-local lookup a call.
    settings_dict = connections.settings[alias]
    key = (alias, settings_dict.get("NAME"), os.getpid())
    pool = _pools.get(key)
    if pool is None:
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                from psycopg_pool import ConnectionPool

                pool = lifo(ConnectionPool)(
                    _conninfo(settings_dict),
                    min_size=0,
                    max_size=_pool_size(),
                    kwargs={"autocommit": True},
                    name=f"checkpoints-{alias}",
                    open=True,
                )
                _pools[key] = pool
    return pool


def kept_cursor(conn, cursor_class, sql: str):
    """The cursor a pooled connection keeps for the statement ``sql``.

    A new cursor per statement made a new adapters map and transformer and looked every
    parameter's dumper up again; psycopg keeps a cursor's transformer while it runs the
    same query object again, so a cursor per statement text keeps them: 48 -> 34 us of CPU
    a statement (17 parameters, two statements alternating). A pooled connection serves one
    caller at a time, so its cursors do too. (The put, the writes and the reads have since
    left the cursor for libpq, `sql.run`; a batch and the sweep's deletes still take one.)
    """
    kept = conn.__dict__.get("_checkpoints_cursors")
    if kept is None or len(kept) >= _KEPT_CURSORS:
        # The statements sent this way are a handful; the bound only guards against a
        # caller passing many texts, past it the map starts over.
        kept = conn._checkpoints_cursors = {}
    cur = kept.get(sql)
    if cur is None or cur.closed:
        cur = kept[sql] = cursor_class(conn)
    return cur


_KEPT_CURSORS = 32


def let_go(cur) -> None:
    """Drop what the statement returned, so an idle pooled connection holds no result
    (a read of a large document would otherwise stay in memory until its next statement).
    psycopg's own reset, as its next ``execute`` would run it
    (`test_a_pooled_connection_keeps_a_cursor_per_statement_and_no_result_between`
    fails if psycopg moves it)."""
    cur._reset()
    tx = getattr(cur, "_tx", None)  # none until the cursor's first statement
    if tx is not None:
        tx.set_pgresult(None)


@contextmanager
def statement_connection(alias: str, *, pooled: bool = True):
    """The psycopg connection a statement runs on, and whether it is a pooled one: the
    caller's transaction's when one is open (or with ``pooled`` false), else pooled."""
    conn = connections[alias]
    try:
        if not pooled or conn.in_atomic_block:
            raw = conn.connection
            if raw is not None and raw.closed and not conn.in_atomic_block:
                # A backend killed under a raw statement leaves a closed connection Django
                # never noticed (raw cursors bypass its error wrapper): reconnect.
                conn.close()
            conn.ensure_connection()
            yield conn.connection, False
            return
        # getconn/putconn, not pool.connection(): its ``with conn`` commits (a wait on an
        # autocommit connection) and it keeps usage stats, 6.1 against 3.2 us a call. An
        # exception is the same either way: putconn rolls back a connection left in a
        # transaction and drops a broken one.
        pool = _pool_for(alias)
        pooled_conn = pool.getconn()
        try:
            yield pooled_conn, True
        finally:
            pool.putconn(pooled_conn)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(
            f"PostgreSQL database {alias!r} ({conn.settings_dict.get('HOST') or 'local'}:"
            f"{conn.settings_dict.get('PORT') or 5432}) failed the statement: {exc}"
        ) from exc


@contextmanager
def statement_cursor(alias: str, sql: str, *, pooled: bool = True):
    """A cursor for the statement ``sql`` on `statement_connection`'s connection (on a
    pooled one, the cursor it keeps for ``sql``)."""
    with statement_connection(alias, pooled=pooled) as (conn, kept):
        if not kept:
            with psycopg.Cursor(conn) as cur:
                yield cur
            return
        cur = kept_cursor(conn, psycopg.Cursor, sql)
        try:
            yield cur
        finally:
            let_go(cur)


async def _async_pool_for(alias: str):
    """The AsyncConnectionPool of ``alias`` for the running event loop.

    psycopg's async connections belong to the loop that opened them, so each loop gets its
    own pool; the connections of pools whose loops have closed are closed when the next
    loop asks (a pool cannot be awaited once its loop is gone, and waiting for the garbage
    collector would hold server connections open meanwhile).
    """
    from psycopg_pool import AsyncConnectionPool

    loop = asyncio.get_running_loop()
    # The handler's settings (the same dicts the wrappers hold): no per-context lookup.
    settings_dict = connections.settings[alias]
    key = (alias, settings_dict.get("NAME"), os.getpid(), id(loop))
    entry = _async_pools.get(key)
    if entry is None or entry[0]() is not loop:
        for stale, (ref, _, opened, _) in list(_async_pools.items()):
            if ref() is None or ref().is_closed():
                _async_pools.pop(stale, None)
                _finish(opened)
        opened = _Opened()

        pool = lifo(AsyncConnectionPool)(
            _conninfo(settings_dict),
            min_size=0,
            max_size=_pool_size(),
            kwargs={"autocommit": True},
            connection_class=_tracked(opened),
            name=f"checkpoints-async-{alias}",
            open=False,
        )
        # Callers wait for a connection here, not in the pool: psycopg_pool queues each
        # waiter under its lock with a condition and a wait_for timeout of its own, which
        # at 128 concurrent runs on 20 connections (every checkout queued) cost a tenth of
        # the process's CPU; a semaphore's waiter is one future (bench.concurrency: 1.31-1.39x
        # -> 1.52-1.56x AsyncPostgresSaver's turns/s, bench/README "Load").
        pool.gate = asyncio.Semaphore(pool.max_size)
        closer = loop.create_task(_close_with_the_loop(pool, opened), name=f"{pool.name}-closer")
        entry = _async_pools[key] = (weakref.ref(loop), pool, opened, closer)
    pool = entry[1]
    if pool.closed:
        await pool.open()  # safe to repeat when another task opened it meanwhile
    return pool


async def _close_with_the_loop(pool, opened: weakref.WeakSet) -> None:
    """Wait until the loop shuts down (asyncio.run cancels every task), then close the pool.

    psycopg_pool's workers treat a cancellation that lands while they open a connection as
    a failed task and go back to waiting for work, so a loop shut down while its pool was
    growing never finished (asyncio.run hung). Closing the pool sends each worker the
    stop it waits for. ``close()`` itself may end in the shutdown's cancellation before it
    reaches the connections (its workers were cancelled too), so they are finished here
    as well: otherwise they stayed open on the server until the next loop asked for a pool.
    """
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        try:
            await pool.close()
        except asyncio.CancelledError:
            pass
        finally:
            _finish(opened)
        raise


class _Opened(weakref.WeakSet):
    """The connections a loop's pool opened; ``making``: the connect generators of those
    still being made (`_tracked`)."""

    def __init__(self) -> None:
        super().__init__()
        self.making: weakref.WeakSet = weakref.WeakSet()


def _tracked(opened: _Opened):
    """An AsyncConnection class whose connections, and connections being made, are kept in
    ``opened`` from their first step, so `_finish` reaches them.

    A loop's shutdown can cancel a connection attempt after the server accepted it; psycopg
    then leaves the half-made connection to the garbage collector (it is held in a cycle
    with the cancelled frames), open on the server meanwhile. Its generator is kept here
    and closed by `_finish`, which releases the connection at once.
    """

    class TrackedConnection(psycopg.AsyncConnection):
        @classmethod
        def _connect_gen(cls, conninfo: str = ""):
            making = super()._connect_gen(conninfo)
            opened.making.add(making)
            return making

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            opened.add(self)

    return TrackedConnection


def _finish(opened: weakref.WeakSet) -> None:
    """Close connections without their event loop (libpq's own close, no await), and
    drop those still being made (`_tracked`)."""
    for conn in list(opened):
        if not conn.closed:
            conn.pgconn.finish()
    for making in list(getattr(opened, "making", ())):
        try:
            making.close()  # a connect generator: its connection, if any, goes with it
        except ValueError:
            pass  # running in another thread right now: its own caller ends it


async def _through_the_gate(pool) -> None:
    """Wait for one of ``pool``'s slots (see `_async_pool_for`), at most the pool's timeout."""
    gate = pool.gate
    if not gate.locked():
        await gate.acquire()
        return
    try:
        async with asyncio.timeout(pool.timeout):
            await gate.acquire()
    except TimeoutError:
        from psycopg_pool import PoolTimeout

        raise PoolTimeout(
            f"no free connection in {pool.name} after {pool.timeout:.2f} sec"
        ) from None


@asynccontextmanager
async def async_statement_connection(alias: str):
    """A pooled autocommit AsyncConnection of the running loop's pool."""
    try:
        pool = await _async_pool_for(alias)
        await _through_the_gate(pool)
        try:
            pooled_conn = await pool.getconn()  # as statement_connection, without connection()
            try:
                yield pooled_conn
            finally:
                await pool.putconn(pooled_conn)
        finally:
            pool.gate.release()
    except psycopg.OperationalError as exc:
        where = connections.settings[alias]
        raise StoreUnavailable(
            f"PostgreSQL database {alias!r} ({where.get('HOST') or 'local'}:"
            f"{where.get('PORT') or 5432}) failed the statement: {exc}"
        ) from exc


@asynccontextmanager
async def async_statement_cursor(alias: str, sql: str):
    """An AsyncCursor for ``sql`` on `async_statement_connection`'s connection (the cursor
    it keeps for ``sql``)."""
    async with async_statement_connection(alias) as conn:
        cur = kept_cursor(conn, psycopg.AsyncCursor, sql)
        try:
            yield cur
        finally:
            let_go(cur)


def close_pools() -> None:
    """Close every pool this process opened (tests, and before a fork).

    Async pools belong to their event loops and cannot be awaited from here: their
    connections are closed directly and the pools forgotten.
    """
    with _lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
        for _, _, opened, _ in _async_pools.values():
            _finish(opened)
        _async_pools.clear()
        _prepare_verdicts.clear()


def behind_pooler(conn) -> bool:
    """Whether a pooler (PgBouncer, pgcat, a cloud proxy) sits between ``conn`` and the server.

    A pooler answers the startup with a backend key of its own, so the process id the
    connection reports differs from the server backend that runs the statement; on a
    direct connection they are the same process.
    """
    with psycopg.Cursor(conn) as cur:
        cur.execute("SELECT pg_backend_pid()", prepare=False)
        return cur.fetchone()[0] != conn.info.backend_pid


async def abehind_pooler(conn) -> bool:
    """`behind_pooler` for an async connection."""
    async with psycopg.AsyncCursor(conn) as cur:
        await cur.execute("SELECT pg_backend_pid()", prepare=False)
        return (await cur.fetchone())[0] != conn.info.backend_pid


async def aprepared_statements_allowed(alias: str, mode: str, conn) -> bool:
    """`prepared_statements_allowed` for an async connection (the same verdict cache)."""
    if mode == "off":
        return False
    key = (alias, os.getpid())
    verdict = _prepare_verdicts.get(key)
    if verdict is None:
        verdict = mode == "on" or not await abehind_pooler(conn)
        _prepare_verdicts[key] = verdict
    return verdict


def prepared_statements_allowed(alias: str, mode: str, conn) -> bool:
    """Whether this process may use named prepared statements on database ``alias``.

    "off" never; "on" until a pooler is seen losing one; "auto" (the default) also not when
    `behind_pooler` sees one on ``conn``: a transaction-pooling PgBouncer hands each
    transaction to any server connection, where a statement prepared on another one is
    missing or, worse, a different statement under the same name.
    """
    if mode == "off":
        return False
    key = (alias, os.getpid())
    verdict = _prepare_verdicts.get(key)
    if verdict is None:
        verdict = mode == "on" or not behind_pooler(conn)
        _prepare_verdicts[key] = verdict
    return verdict


def forbid_prepared(alias: str) -> None:
    """No more named prepared statements on ``alias`` in this process (a pooler lost one)."""
    _prepare_verdicts[(alias, os.getpid())] = False
