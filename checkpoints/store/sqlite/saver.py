"""The saver on SQLite: its put and writes, and its statements (`sql`) on Django's own
connection.

SQLite runs in the process, so round trips cost little; what cost the time was building
ORM queries (about 2 ms a read). The statements run inside whatever transaction Django
holds; connections are tuned, lent and writers queued by `connection`, which also says
what a commit is worth (`connection.durability`).
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connections, transaction

from checkpoints.models import FinishedMark, Thread
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.orm.saver import OrmSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.sqlite import space
from checkpoints.store.sqlite.connection import durability, warm_connection, write_transaction
from checkpoints.store.sqlite.sql import (
    GET_BY_ID_ONE,
    GET_LATEST_ONE,
    INSERT_BLOB,
    PUT_WRITE_KEEP,
    PUT_WRITE_REPLACE,
    TOUCH_THREAD,
    UPSERT_CHECKPOINT,
    UPSERT_THREAD,
    list_page,
    parent_sends,
    with_blobs_and_writes,
)


class SqliteStore(OrmSaver):
    """Checkpoints in a SQLite file: statements on Django's own sqlite3 connection."""

    provider = "sqlite"
    vendor = "sqlite"
    # SQLite hands JSON columns back as text.
    json_as_text = True

    # -- the dialect's hooks ----------------------------------------------------------------
    def _warm(self, *, write: bool = False):
        """An open connection for this call (`connection.warm_connection`)."""
        return warm_connection(self.using, write=write)

    # -- put: the thread row, the new blobs and the checkpoint, in one write transaction ---
    def _store_checkpoint(self, plan: PutPlan) -> None:
        row, blobs = self._checkpoint_row(plan, self._owner_pk(plan.owner))
        # BEGIN/COMMIT straight on sqlite3, unless the put prunes (the ORM's own queries).
        unit = transaction.atomic if self.max_checkpoints else write_transaction
        with unit(self.using):
            # Stamped inside the transaction, with the level the connection commits at
            # (`durability`): no reader sees it before the commit.
            self._stamp_row(row, plan)
            thread_pk = self._put_row(row, blobs)
            if self.max_checkpoints:
                self._prune_pk(thread_pk, self.max_checkpoints, only_ns=plan.ns)

    def _delete_unwritten(self, judged: dict[str, datetime | None]) -> set[str]:
        # The check and the delete in one write transaction (BEGIN IMMEDIATE takes the
        # write lock first, so no put lands between them).
        db = self.using
        ids = list(judged)
        kept: set[str] = set()
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            with write_transaction(db):
                rows = {
                    t: (pk, last_write)
                    for t, pk, last_write in Thread.objects.using(db)
                    .filter(thread_id__in=chunk)
                    .values_list("thread_id", "pk", "last_write_at")
                }
                written = {t for t in chunk if (rows[t][1] if t in rows else None) != judged[t]}
                self._raw_delete_threads(
                    [rows[t][0] for t in chunk if t in rows and t not in written]
                )
                raw_delete(
                    FinishedMark.objects.using(db).filter(
                        thread_id__in=[t for t in chunk if t not in written]
                    )
                )
            kept |= written
        return kept

    # -- the statements -------------------------------------------------------------------

    def _sqlite_cursor(self):
        """A cursor on Django's own sqlite3 connection (inside any transaction it holds)."""
        conn = connections[self.using]
        conn.ensure_connection()
        return conn.connection.cursor()

    def _put_row(self, row: dict, blobs: list[tuple]) -> int:
        ops = connections[self.using].ops
        params = dict(
            row,
            now=ops.adapt_datetimefield_value(row["now"]),
            channel_versions=json.dumps(row["channel_versions"]),
            metadata=json.dumps(row["metadata"]),
        )
        cur = self._sqlite_cursor()
        try:
            thread_pk = cur.execute(UPSERT_THREAD, params).fetchone()[0]
            if blobs:
                cur.executemany(
                    INSERT_BLOB,
                    [(thread_pk, row["ns"], c, v, t, b) for c, v, t, b in blobs],
                )
            cur.execute(UPSERT_CHECKPOINT, dict(params, thread_pk=thread_pk))
        finally:
            cur.close()
        return thread_pk

    # -- put_writes: one statement per write, in one transaction with its thread's row
    # (TOUCH_THREAD) ----------------------------------------------------------------------
    def _store_writes(self, plan: WritesPlan) -> None:
        rows = self._write_rows(plan)
        sql = PUT_WRITE_REPLACE if plan.special else PUT_WRITE_KEEP
        key = (plan.ns, plan.checkpoint_id, plan.task_id, plan.task_path)
        args = [(*key, *row, plan.thread_id) for row in rows]
        now = connections[self.using].ops.adapt_datetimefield_value(utcnow())
        cur = self._sqlite_cursor()
        try:
            with write_transaction(self.using):
                cur.execute(TOUCH_THREAD, {"thread_id": plan.thread_id, "now": now})
                cur.executemany(sql, args)
        finally:
            cur.close()

    def _get_rows(self, params: dict) -> list[tuple]:
        sql = GET_BY_ID_ONE if params["checkpoint_id"] else GET_LATEST_ONE
        cur = self._sqlite_cursor()
        try:
            found = cur.execute(sql, params).fetchall()
        finally:
            cur.close()
        row, blobs, writes, sends = None, [], [], []
        for kind, *cells in found:
            if kind == 0:
                row = cells
            elif kind == 1:
                blobs.append(cells[:3])
            elif kind == 2:
                writes.append(cells[:6])
            else:  # path first: (task path, task id, idx, type, bytes)
                sends.append((cells[1], cells[0], cells[2], None, cells[3], cells[4]))
        return [] if row is None else [(*row, blobs, writes, parent_sends(sends))]

    def _page(self, params, wanted, cursor, size) -> list[tuple]:
        step = wanted.get("step")
        step = step if isinstance(step, int) and not isinstance(step, bool) else None
        source = wanted.get("source") if isinstance(wanted.get("source"), str) else None
        sql = list_page(
            thread=params.get("thread_id") is not None,
            ns=params.get("ns") is not None,
            checkpoint_id=params.get("checkpoint_id") is not None,
            before=params.get("before") is not None,
            source=source is not None,
            step=step is not None,
            cursor=cursor is not None,
        )
        values = dict(params, limit=size, source=source, step=step)
        if cursor is not None:
            values["cursor_id"], values["cursor_pk"] = cursor
        cur = self._sqlite_cursor()
        try:
            return with_blobs_and_writes(cur, cur.execute(sql, values).fetchall())
        finally:
            cur.close()

    def _read_durability(self) -> str:
        return durability(self.using)

    # -- disk space -----------------------------------------------------------------------
    def reclaim_space(self, *, final: bool = False) -> int | None:
        return space.reclaim_space(self.using, final=final)

    def compact(self) -> dict:
        return space.compact(self.using)
