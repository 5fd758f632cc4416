"""The saver on PostgreSQL: its put and writes, sync and async side by side, and how its
statements (`sql`, which also holds their libpq path) are run on pooled connections (`pool`).

A put reads in three files: this one (`_store_checkpoint`, `_direct`), `sql` (PUT, its
parameters and `sql.run`) and `pool` (the connection it runs on).

Each write and read is one statement on a pooled connection; the async hot paths (aput,
aput_writes, aget_tuple, alist, adelete_thread) run on psycopg's AsyncConnectionPool (one
pool per database and event loop), so concurrent graphs on one loop run side by side.
Everything else, and every path where the native one would differ (``PG_POOL`` off, a
standby-wait bound, ``max_checkpoints`` pruning in the put's transaction, a caller's open
transaction, an owner not yet looked up), runs the sync method in Django's sync thread.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connections, transaction
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints.conf import setting
from checkpoints.errors import StoreUnavailable
from checkpoints.flows import astream
from checkpoints.store.orm.saver import MISSING_OWNER, OrmSaver
from checkpoints.store.planning import config_keys
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.records import ThreadHoldings
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.postgres import schema, space
from checkpoints.store.postgres import sql as pgsql
from checkpoints.store.postgres.pool import (
    abehind_pooler,
    aprepared_statements_allowed,
    async_statement_connection,
    async_statement_cursor,
    behind_pooler,
    forbid_prepared,
    prepared_statements_allowed,
    statement_connection,
    statement_cursor,
)
from checkpoints.store.postgres.sql import (
    DELETE_THREAD,
    DELETE_THREADS,
    DELETE_UNWRITTEN,
    GET_BY_ID,
    GET_LATEST,
    PUT,
    PUT_BATCH,
    PUT_WRITES_KEEP,
    PUT_WRITES_REPLACE,
    READ_LEVEL,
    batch_params,
    pack_params,
    page_statement,
    put_params,
    writes_statement,
)
from checkpoints.store.requests import DeleteRound, ForgetThreads, StoreCheckpoint, StoreWrites


class StandbyWaitTimeout(StoreUnavailable):
    """A synchronous commit waited past ``PG_STANDBY_WAIT_SECONDS`` for the standby."""

    code = "standby_wait_timeout"


# What a pooler that lost a named prepared statement answers: it was prepared on another
# server connection (missing here, or a different one under the same name here).
_LOST_PREPARED = (psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName)


def _idle(conn) -> bool:
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def _session_dropped(conn, prepare: bool, exc: Exception) -> bool:
    """Whether the session may have dropped the statement itself (if no pooler is there):
    one it no longer has, on an idle connection that can ask (`behind_pooler`)."""
    return prepare and _idle(conn) and isinstance(exc, psycopg.errors.InvalidSqlStatementName)


# The statements a graph step writes and get_tuple reads, sent through libpq without
# psycopg's cursor where the connection allows (`_direct`); PUT's row is the thread's key
# and the stamped level, a get's rows are loaded as the cursor's fetchall loads them.
_DIRECT = {
    PUT: pgsql.Statement(PUT, columns=(int, bytes.decode)),
    PUT_WRITES_KEEP: pgsql.Statement(PUT_WRITES_KEEP),
    PUT_WRITES_REPLACE: pgsql.Statement(PUT_WRITES_REPLACE),
    GET_LATEST: pgsql.Statement(GET_LATEST, rows=True),
    GET_BY_ID: pgsql.Statement(GET_BY_ID, rows=True),
}


def _statement(sql: str) -> pgsql.Statement:
    """The direct form of ``sql``: one of `_DIRECT`, else a list page's (made once per
    filter shape: `sql.list_page` has a few dozen)."""
    statement = _DIRECT.get(sql)
    if statement is None:
        statement = _DIRECT[sql] = pgsql.Statement(sql, rows=True)
    return statement


def _answer(cur, statement: pgsql.Statement):
    """What `_direct` returns, from the cursor it falls back to: as `sql.run` answers."""
    if statement.rows:
        return cur.fetchall()
    return cur.fetchone() if statement.columns else None


class PostgresStore(OrmSaver):
    """Checkpoints in a PostgreSQL database: one statement per write, read and page."""

    provider = "postgres"
    vendor = "postgresql"
    # A parked run must be resumable by any worker: a shared server is.
    can_park = True
    # The metadata column has a GIN index, so containment is an index lookup.
    indexed_json_containment = True
    prefers_index_walk = True

    @classmethod
    @contextmanager
    def tuned_reads(cls, alias: str) -> Iterator[None]:
        """JIT off for the block (SET LOCAL, so a pooler in transaction mode sees it end with
        the transaction): compiling the console's one-off queries costs more than it saves."""
        with transaction.atomic(using=alias), connections[alias].cursor() as cur:
            cur.execute("SET LOCAL jit = off")
            yield

    @classmethod
    def walk_the_index(cls, cursor) -> None:
        cursor.execute("SET LOCAL enable_sort = off")

    new_store_extra_sql = schema.EXTRA_SQL
    lock_new_store = staticmethod(schema.lock_new_store)
    schema_batch = staticmethod(schema.Batch)

    # -- put: one statement (sql.PUT) writes the thread row, the new blobs and the
    # checkpoint, stamped with the durability level its own session commits with ---------
    def _store_checkpoint(self, plan: PutPlan) -> None:
        row, blobs = self._checkpoint_row(plan, self._owner_pk(plan.owner))
        if not self.max_checkpoints:
            # One statement commits (or fails) whole on its own: no BEGIN/COMMIT round
            # trips. Its own level is stamped, so none is read beforehand (reading it
            # would use, or open, a connection of the calling thread's own).
            self._stamp_row(row, plan, level="")
            _, plan.durability["level"] = self._direct(PUT, put_params(row, blobs))
            return
        # The prune joins the put's transaction.
        with transaction.atomic(using=self.using):
            self._stamp_row(row, plan, level="")
            thread_pk, plan.durability["level"] = self._direct(PUT, put_params(row, blobs))
            self._prune_pk(thread_pk, self.max_checkpoints, only_ns=plan.ns)

    async def _astore_checkpoint(self, plan: PutPlan) -> None:
        # Pruning puts take the sync path (`aperform`); an owner not looked up yet is
        # looked up in Django's thread.
        owner = self._owner_cache.get(plan.owner, MISSING_OWNER) if plan.owner else None
        if owner is MISSING_OWNER:
            owner = await self._in_thread(self._owner_pk, plan.owner)
        row, blobs = self._checkpoint_row(plan, owner)
        self._stamp_row(row, plan, level="")
        _, plan.durability["level"] = await self._adirect(PUT, put_params(row, blobs))

    # -- put_writes: one statement (sql.PUT_WRITES_KEEP or _REPLACE) ------------------------
    def _store_writes(self, plan: WritesPlan) -> None:
        self._direct(*writes_statement(plan, self._write_rows(plan)))

    async def _astore_writes(self, plan: WritesPlan) -> None:
        await self._adirect(*writes_statement(plan, self._write_rows(plan)))

    def _encode_batch(self, plans: list[PutPlan], writes: list[WritesPlan]) -> dict | None:
        # A batch put by a user is not an import's: its owner is looked up on a connection.
        if self.max_checkpoints or not plans or any(p.owner for p in plans):
            return None
        return pack_params(self._batch_params(plans, writes, None))

    def _batch_params(self, plans: list[PutPlan], writes: list[WritesPlan], owner) -> dict:
        # The last of a repeated (ns, id) wins, as separate puts would leave it; one
        # statement may not touch a row twice.
        latest = {(p.ns, p.checkpoint_id): p for p in plans}
        rows = []
        for plan in latest.values():
            row, blobs = self._checkpoint_row(plan, owner)
            self._stamp_row(row, plan, level="")
            rows.append((row, blobs))
        for plan in plans:
            plan.durability = latest[(plan.ns, plan.checkpoint_id)].durability
        write_rows = [
            (w.ns, w.checkpoint_id, w.task_id, w.task_path, *item)
            for w in writes
            for item in self._write_rows(w)
        ]
        return batch_params(plans[0].thread_id, owner, rows, write_rows)

    def _store_batch(
        self, plans: list[PutPlan], writes: list[WritesPlan], encoded: dict | None = None
    ) -> None:
        if self.max_checkpoints or not plans:
            return super()._store_batch(plans, writes)  # pruning needs the ORM's unit
        if encoded is None:
            owner = self._owner_pk(next((p.owner for p in plans if p.owner), ""))
            encoded = self._batch_params(plans, writes, owner)
        with self._raw_cursor(PUT_BATCH) as cur:
            self._execute(cur, PUT_BATCH, encoded)
            level = cur.fetchone()[0]
        for plan in plans:
            plan.durability["level"] = level

    def _delete_threads_round(self, thread_ids: list[str]) -> dict[str, ThreadHoldings]:
        self._delete_round(thread_ids)
        return {}  # nothing to repeat: see sql.DELETE_THREADS

    def _forget_threads(self, thread_ids: list[str]) -> None:
        return None  # DELETE_THREADS dropped the marks with the threads

    # -- async: native on the async pool where it can be ----------------------------------
    def _native_async(self) -> bool:
        """Whether the async hot paths may run on the async pool (see the module doc)."""
        return (
            self.pooled
            and not setting("PG_STANDBY_WAIT_SECONDS")
            # A transaction the caller holds on this thread: its statements must join it.
            and not connections[self.using].in_atomic_block
        )

    async def aperform(self, request) -> Any:
        if self._native_async():
            match request:
                case StoreCheckpoint(plan) if not self.max_checkpoints:
                    return await self._astore_checkpoint(plan)
                case StoreWrites(plan):
                    return await self._astore_writes(plan)
                case DeleteRound(thread_ids):
                    await self._adelete_round(thread_ids)
                    return {}
                case ForgetThreads():
                    return None
        return await super().aperform(request)

    async def aget_tuple(self, config) -> CheckpointTuple | None:
        if not self._native_async():
            return await super().aget_tuple(config)
        thread_id, ns, checkpoint_id = config_keys(config)
        params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        found = await self._aget_rows(params)
        return self._tuples(found)[0] if found else None

    async def alist(
        self, config, *, filter=None, before=None, limit=None
    ) -> AsyncIterator[CheckpointTuple]:
        if not self._native_async():
            async for item in super().alist(config, filter=filter, before=before, limit=limit):
                yield item
            return
        flow = self._list_flow(config, filter=filter, before=before, limit=limit)
        async for page in astream(flow, lambda request: self._apage(*request)):
            for item in page:
                yield item

    # -- running a statement --------------------------------------------------------------

    def _raw_cursor(self, sql: str):
        """A server-binding cursor for ``sql``: the caller's transaction if one is open,
        else pooled."""
        return statement_cursor(self.using, sql, pooled=self.pooled)

    def _execute(self, cur, sql: str, params, **options) -> None:
        """Run one statement on ``cur`` (see `_retried`)."""
        conn = cur.connection
        prepare = prepared_statements_allowed(self.using, self.prepare_mode, conn)
        self._retried(
            conn, prepare, lambda prepare: cur.execute(sql, params, prepare=prepare, **options)
        )

    def _direct(self, sql: str, params: dict):
        """Run one of the `_DIRECT` statements: a read's rows; a write's first row, if it
        returns rows.

        Through libpq (`sql.run`) on an idle autocommit connection; on a cursor inside a
        caller's transaction, or for a parameter `sql.encode` does not encode.
        """
        statement = _statement(sql)
        with statement_connection(self.using, pooled=self.pooled) as (conn, kept):
            encoded = pgsql.encode(statement, params) if pgsql.usable(conn) else None
            if encoded is None:
                with psycopg.Cursor(conn) as cur:
                    self._execute(cur, sql, params, binary=statement.rows)
                    return _answer(cur, statement)
            prepare = prepared_statements_allowed(self.using, self.prepare_mode, conn)
            return self._retried(
                conn,
                prepare,
                lambda prepare: pgsql.run(conn, statement, encoded, prepare=prepare, kept=kept),
            )

    def _retried(self, conn, prepare: bool, send):
        """``send(prepare)``, dropping to unnamed statements if a pooler lost a prepared one
        (preparing again if the session dropped it, `_lost_prepared`).

        The error never reaches the caller raw: outside a transaction the statement runs
        again unprepared (it changed nothing); inside one the transaction is gone, so the
        caller gets a retryable StoreUnavailable.
        """
        try:
            return self._bounded(conn, send, prepare)
        except _LOST_PREPARED as exc:
            direct = _session_dropped(conn, prepare, exc) and not behind_pooler(conn)
            return self._bounded(conn, send, self._lost_prepared(conn, prepare, exc, direct))

    async def _aexecute(self, cur, sql: str, params, **options) -> None:
        """`_execute` on an async cursor (no standby bound: `OrmAsync` checks it is unset)."""
        conn = cur.connection
        prepare = await aprepared_statements_allowed(self.using, self.prepare_mode, conn)
        await self._aretried(
            conn, prepare, lambda prepare: cur.execute(sql, params, prepare=prepare, **options)
        )

    async def _adirect(self, sql: str, params: dict):
        """`_direct` on the async pool (no standby bound: `OrmAsync` checks it is unset)."""
        statement = _statement(sql)
        async with async_statement_connection(self.using) as conn:
            encoded = pgsql.encode(statement, params) if pgsql.usable(conn) else None
            if encoded is None:
                async with psycopg.AsyncCursor(conn) as cur:
                    await self._aexecute(cur, sql, params, binary=statement.rows)
                    if statement.rows:
                        return await cur.fetchall()
                    return (await cur.fetchone()) if statement.columns else None
            prepare = await aprepared_statements_allowed(self.using, self.prepare_mode, conn)
            return await self._aretried(
                conn,
                prepare,
                # The async pool's connections are the store's alone.
                lambda again: pgsql.arun(conn, statement, encoded, prepare=again, kept=True),
            )

    async def _aretried(self, conn, prepare: bool, send):
        """`_retried` for a coroutine ``send`` (no standby bound on the async path)."""
        try:
            return await send(prepare)
        except _LOST_PREPARED as exc:
            direct = _session_dropped(conn, prepare, exc) and not await abehind_pooler(conn)
            return await send(self._lost_prepared(conn, prepare, exc, direct))

    def _lost_prepared(self, conn, prepare: bool, exc: Exception, direct: bool) -> bool:
        """A prepared statement was lost: whether to run again prepared (or raise).

        On a ``direct`` connection (no pooler) the session itself dropped it: psycopg
        sends DEALLOCATE ALL when it rolls back a connection it prepared statements on
        (a caller's failed transaction, a pool taking back a connection left in one),
        which takes the store's statements too. They are prepared again on this
        connection, and the process keeps preparing. Behind a pooler they were prepared on
        another server connection: no more prepared statements on this database here.
        """
        pgsql.forget_prepared(conn)
        if direct:
            return True
        forbid_prepared(self.using)
        if not prepare or not _idle(conn):
            raise StoreUnavailable(
                f"PostgreSQL database {self.using!r}: a connection pooler lost a prepared "
                f"statement ({exc.sqlstate}: {exc}); this process no longer prepares "
                "statements there, retry the operation"
            ) from exc
        return False

    def _bounded(self, conn, send, prepare: bool):
        """``send(prepare)``; with ``PG_STANDBY_WAIT_SECONDS`` set, wait at most that long.

        PostgreSQL has no bound of its own on a commit's wait for a synchronous standby (a
        named but absent one makes it wait forever). Past the bound the wait is cancelled:
        a statement still running wrote nothing; one already committed locally says so in a
        warning. Either way the write is not acknowledged, and the error names the wait.
        """
        bound = setting("PG_STANDBY_WAIT_SECONDS")
        if not bound or not _idle(conn):
            # Inside a transaction the wait comes at its COMMIT, which its owner runs.
            return send(prepare)
        warnings: list[str] = []

        def on_notice(diagnostic) -> None:
            warnings.append(diagnostic.message_primary or "")

        conn.add_notice_handler(on_notice)
        timer = threading.Timer(float(bound), conn.cancel_safe)
        timer.start()
        try:
            result = send(prepare)
        except psycopg.errors.QueryCanceled as exc:
            timer.cancel()
            timer.join()
            raise StandbyWaitTimeout(
                f"{self._waited(conn, bound)}; the statement was cancelled and wrote nothing"
            ) from exc
        finally:
            # Joined, so a cancel being sent cannot reach the connection's next statement.
            timer.cancel()
            timer.join()
            conn.remove_notice_handler(on_notice)
        if any("synchronous replication" in w for w in warnings):
            raise StandbyWaitTimeout(
                f"{self._waited(conn, bound)} to confirm the commit: it is written on the "
                "primary only and was not acknowledged"
            )
        return result

    def _waited(self, conn, bound) -> str:
        with psycopg.Cursor(conn) as cur:
            cur.execute("SHOW synchronous_standby_names", prepare=False)
            names = cur.fetchone()[0]
        return (
            f"PostgreSQL database {self.using!r} waited more than {bound} s "
            f"(PG_STANDBY_WAIT_SECONDS) for its synchronous standby {names or '(none named)'!r}"
        )

    def _get_rows(self, params: dict) -> list[tuple]:
        return self._direct(GET_BY_ID if params["checkpoint_id"] else GET_LATEST, params)

    async def _aget_rows(self, params: dict) -> list[tuple]:
        return await self._adirect(GET_BY_ID if params["checkpoint_id"] else GET_LATEST, params)

    def _page(self, params, wanted, cursor, size) -> list[tuple]:
        return self._direct(*page_statement(params, wanted, cursor, size))

    async def _apage(self, params, wanted, cursor, size) -> list[tuple]:
        return await self._adirect(*page_statement(params, wanted, cursor, size))

    def _delete_round(self, thread_ids: list[str]) -> None:
        """Delete the threads whole, a statement per thousand (sql.DELETE_THREADS);
        one thread by DELETE_THREAD, whose plan a prepared statement keeps."""
        for sql, params in self._delete_statements(thread_ids):
            with self._raw_cursor(sql) as cur:
                self._execute(cur, sql, params)

    @staticmethod
    def _delete_statements(thread_ids: list[str]) -> list[tuple[str, dict]]:
        if len(thread_ids) == 1:
            return [(DELETE_THREAD, {"id": thread_ids[0]})]
        return [
            (DELETE_THREADS, {"ids": thread_ids[start : start + 1000]})
            for start in range(0, len(thread_ids), 1000)
        ]

    def _delete_unwritten(self, judged: dict) -> set[str]:
        """The threads of ``judged`` kept as written since (see sql.DELETE_UNWRITTEN)."""
        ids = list(judged)
        kept = set()
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            present = [t for t in chunk if judged[t] is not None]
            params = {
                "ids": pgsql.TextArray(present),
                "writes": pgsql.TextArray(judged[t].isoformat() for t in present),
                "absent": pgsql.TextArray(t for t in chunk if judged[t] is None),
            }
            with self._raw_cursor(DELETE_UNWRITTEN) as cur:
                self._execute(cur, DELETE_UNWRITTEN, params)
                rows = cur.fetchall()
            deleted = {t for t, gone in rows if gone}
            kept |= {t for t, gone in rows if not gone}
            kept |= {t for t in present if t not in deleted}
        return kept

    async def _adelete_round(self, thread_ids: list[str]) -> None:
        for sql, params in self._delete_statements(thread_ids):
            async with async_statement_cursor(self.using, sql) as cur:
                await self._aexecute(cur, sql, params)

    def _read_durability(self) -> str:
        """The level a commit on this thread's connection gets now (see sql.LEVEL)."""
        with connections[self.using].cursor() as cur:
            cur.execute(READ_LEVEL)
            return cur.fetchone()[0]

    # -- disk space -----------------------------------------------------------------------
    def compact(self) -> dict:
        return space.compact(self.using)
