"""Hand-written SQLite statements for the ORM saver's hot paths.

SQLite runs in the process, so round trips cost little; what cost the time was building
ORM queries (about 2 ms a read). These statements run on Django's own sqlite3 connection,
inside whatever transaction Django holds, with the same tables and column formats.
"""

from __future__ import annotations

import _thread
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction

from checkpoints.store.planning import utcnow

ROW = """
SELECT c.id, c.thread_id, t.thread_id, c.checkpoint_ns, c.checkpoint_id,
       c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata, c.channel_versions
FROM checkpoints_checkpoint c JOIN checkpoints_thread t ON t.id = c.thread_id
"""
_THREAD = "c.thread_id = (SELECT id FROM checkpoints_thread WHERE thread_id = :thread_id)"

GET_LATEST = (
    ROW + f"WHERE {_THREAD} AND c.checkpoint_ns = :ns ORDER BY c.checkpoint_id DESC LIMIT 1"
)
GET_BY_ID = ROW + f"WHERE {_THREAD} AND c.checkpoint_ns = :ns AND c.checkpoint_id = :checkpoint_id"

# Versions are JSON numbers or strings; blob rows hold them as text, as str() writes them.
BLOBS = """
SELECT b.channel, b.type, b.blob
FROM json_each(:versions) AS v
-- CROSS JOIN keeps this order: one probe of the blob key per channel, not a thread scan.
CROSS JOIN checkpoints_channelblob b
  ON b.thread_id = :thread_pk AND b.checkpoint_ns = :ns
 AND b.channel = v.key AND b.version = CAST(v.value AS TEXT)
WHERE b.type <> 'empty'
"""

# get_tuple in one statement: the checkpoint row (kind 0), then its blobs (kind 1) and its
# pending writes (kind 2), padded to the row's width; one round through SQLite, not three.
_ONE = """
WITH c AS MATERIALIZED (
  SELECT c.id, c.thread_id AS thread_pk, t.thread_id AS thread_name, c.checkpoint_ns,
         c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata,
         c.channel_versions
  FROM checkpoints_checkpoint c JOIN checkpoints_thread t ON t.id = c.thread_id
  WHERE {where}
)
SELECT 0, * FROM c
UNION ALL
SELECT 1, b.channel, b.type, b.blob, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM c, json_each(c.channel_versions) AS v
CROSS JOIN checkpoints_channelblob b
  ON b.thread_id = c.thread_pk AND b.checkpoint_ns = c.checkpoint_ns
 AND b.channel = v.key AND b.version = CAST(v.value AS TEXT)
WHERE b.type <> 'empty'
UNION ALL
SELECT 2, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob, NULL, NULL, NULL, NULL
FROM c CROSS JOIN checkpoints_pendingwrite w
  ON w.thread_id = c.thread_pk AND w.checkpoint_ns = c.checkpoint_ns
 AND w.checkpoint_id = c.checkpoint_id
"""
GET_LATEST_ONE = _ONE.format(
    where=f"{_THREAD} AND c.checkpoint_ns = :ns ORDER BY c.checkpoint_id DESC LIMIT 1"
)
GET_BY_ID_ONE = _ONE.format(
    where=f"{_THREAD} AND c.checkpoint_ns = :ns AND c.checkpoint_id = :checkpoint_id"
)

WRITES = """
SELECT task_id, task_path, idx, channel, type, blob FROM checkpoints_pendingwrite
WHERE thread_id = :thread_pk AND checkpoint_ns = :ns AND checkpoint_id = :checkpoint_id
"""

UPSERT_THREAD = """
INSERT INTO checkpoints_thread (thread_id, owner_id, created_at, last_write_at, version)
VALUES (:thread_id, :owner_id, :now, :now, 1)
ON CONFLICT (thread_id) DO UPDATE SET last_write_at = excluded.last_write_at,
    owner_id = COALESCE(checkpoints_thread.owner_id, excluded.owner_id)
RETURNING id
"""

INSERT_BLOB = """
INSERT INTO checkpoints_channelblob (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

UPSERT_CHECKPOINT = """
INSERT INTO checkpoints_checkpoint (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    channel_versions, metadata, source, step, run_id, durability, created_at
) VALUES (:thread_pk, :ns, :checkpoint_id, :parent_id, :type, :body, :channel_versions,
          :metadata, :source, :step, :run_id, :durability, :now)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = excluded.parent_checkpoint_id, type = excluded.type,
    checkpoint = excluded.checkpoint, channel_versions = excluded.channel_versions,
    metadata = excluded.metadata, source = excluded.source, step = excluded.step,
    run_id = excluded.run_id, durability = excluded.durability,
    created_at = excluded.created_at
"""

# The thread's row for a task's writes: made when they come before its first checkpoint
# (LangGraph may store a run's input writes first), else its last write moved to now, so a
# sweep that judged the thread before these writes keeps it (DELETE_UNWRITTEN's rule).
TOUCH_THREAD = """
INSERT INTO checkpoints_thread (thread_id, created_at, last_write_at, version)
VALUES (:thread_id, :now, :now, 1) ON CONFLICT (thread_id) DO UPDATE
SET last_write_at = excluded.last_write_at WHERE last_write_at < excluded.last_write_at
"""

# A task's writes, after TOUCH_THREAD in the same transaction.
_PUT_WRITE = """
INSERT INTO checkpoints_pendingwrite (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
)
SELECT t.id, ?, ?, ?, ?, ?, ?, ?, ? FROM checkpoints_thread t WHERE t.thread_id = ?
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO {conflict}
"""
PUT_WRITE_KEEP = _PUT_WRITE.format(conflict="NOTHING")
PUT_WRITE_REPLACE = _PUT_WRITE.format(
    conflict="UPDATE SET channel = excluded.channel, type = excluded.type, "
    "blob = excluded.blob, task_path = excluded.task_path"
)


def list_page(
    *,
    thread: bool,
    ns: bool,
    checkpoint_id: bool,
    before: bool,
    source: bool,
    step: bool,
    cursor: bool,
) -> str:
    """The list query for the given filters; every value is a bound parameter."""
    where = []
    if thread:
        where.append(_THREAD)
    if ns:
        where.append("c.checkpoint_ns = :ns")
    if checkpoint_id:
        where.append("c.checkpoint_id = :checkpoint_id")
    if before:
        where.append("c.checkpoint_id < :before")
    if source:
        where.append("c.source = :source")
    if step:
        where.append("c.step = :step")
    if cursor:
        where.append(
            "(c.checkpoint_id < :cursor_id OR (c.checkpoint_id = :cursor_id AND c.id < :cursor_pk))"
        )
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    return ROW + clause + " ORDER BY c.checkpoint_id DESC, c.id DESC LIMIT :limit"


def with_blobs_and_writes(cur, rows: list[tuple]) -> list[tuple]:
    """Each row extended with its blobs and pending writes, as the PostgreSQL query gives."""
    out = []
    for row in rows:
        tpk, ns, cid, versions = row[1], row[3], row[4], row[9]
        if not isinstance(versions, str):
            versions = json.dumps(versions)
        blobs = cur.execute(BLOBS, {"versions": versions, "thread_pk": tpk, "ns": ns}).fetchall()
        writes = cur.execute(WRITES, {"thread_pk": tpk, "ns": ns, "checkpoint_id": cid}).fetchall()
        out.append((*row, blobs, writes))
    return out


# Connections kept open for threads that come without one, per (alias, database file).
_IDLE: dict[tuple[str, str], list] = {}
_IDLE_LOCK = threading.Lock()
_IDLE_MAX = 8
# One writer at a time per database file in this process, queued here: SQLite admits one
# writer anyway, and its busy handler waits by sleeping 1, 2, 5, 10... ms.
_WRITERS: dict[tuple[str, str], threading.RLock] = {}


@contextmanager
def warm_connection(alias: str, *, write: bool = False) -> Iterator[None]:
    """Run the block on an open connection of ``alias``, lent from a pool when needed.

    LangGraph runs a graph's puts in worker threads it makes for every invocation, and each
    new thread would open a Django connection of its own (1-2 ms to connect, then a cold
    schema and page cache) and leave it to the garbage collector. A thread that holds no
    open connection and no transaction borrows an open one here for the call instead, as
    Django's own thread-local connection: autocommit either way, so nothing else changes.

    ``write``: also wait for this process's other writers to the file first, unless the
    thread is inside a transaction already (which may hold SQLite's write lock itself).
    """
    held = getattr(connections._connections, alias, None)
    key = (alias, str(connections.settings[alias]["NAME"]))
    if write and not (held is not None and held.in_atomic_block):
        with _IDLE_LOCK:
            writer = _WRITERS.setdefault(key, threading.RLock())
        with writer:
            with _lent(alias, key, held):
                yield
        return
    with _lent(alias, key, held):
        yield


@contextmanager
def _lent(alias: str, key: tuple[str, str], held) -> Iterator[None]:
    if held is not None and (held.connection is not None or held.in_atomic_block):
        yield
        return
    with _IDLE_LOCK:
        idle = _IDLE.get(key)
        wrapper = idle.pop() if idle else None
    if wrapper is None:
        wrapper = connections.create_connection(alias)
    # Django checks a connection is used by the thread that made it: this one, for now.
    wrapper._thread_ident = _thread.get_ident()
    connections[alias] = wrapper
    try:
        yield
    finally:
        if held is not None:
            connections[alias] = held
        else:
            del connections[alias]
        _give_back(key, wrapper)


def _give_back(key: tuple[str, str], wrapper) -> None:
    reusable = (
        wrapper.connection is not None
        and not wrapper.in_atomic_block
        and str(wrapper.settings_dict["NAME"]) == key[1]
    )
    if reusable:
        with _IDLE_LOCK:
            idle = _IDLE.setdefault(key, [])
            if len(idle) < _IDLE_MAX:
                idle.append(wrapper)
                return
    wrapper._thread_ident = _thread.get_ident()
    wrapper.close()


@contextmanager
def write_transaction(alias: str) -> Iterator[None]:
    """One transaction for a write: Django's ``atomic`` inside a caller's transaction,
    else BEGIN (in the configured ``transaction_mode``) and COMMIT straight on the sqlite3
    connection, which skips atomic's bookkeeping (a third of a small put's time)."""
    wrapper = connections[alias]
    if wrapper.in_atomic_block or not wrapper.get_autocommit():
        with transaction.atomic(using=alias):
            yield
        return
    wrapper.ensure_connection()
    raw = wrapper.connection
    mode = getattr(wrapper, "transaction_mode", None)
    with wrapper.wrap_database_errors:
        raw.execute(f"BEGIN {mode}" if mode else "BEGIN")
    try:
        yield
    except BaseException:
        if raw.in_transaction:
            raw.rollback()
        raise
    with wrapper.wrap_database_errors:
        raw.commit()


class SqlitePaths:
    """The ORM saver's hot paths on SQLite, on Django's own sqlite3 connection."""

    using: str

    def _sqlite_cursor(self):
        """A cursor on Django's own sqlite3 connection (inside any transaction it holds)."""
        conn = connections[self.using]
        conn.ensure_connection()
        return conn.connection.cursor()

    def _put_sqlite(self, row: dict, blobs: list[tuple]) -> int:
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

    def _put_writes_sqlite(self, thread_id, ns, checkpoint_id, task_id, task_path, rows, special):
        """One statement per write, in one transaction with its thread's row (TOUCH_THREAD)."""
        sql = PUT_WRITE_REPLACE if special else PUT_WRITE_KEEP
        args = [
            (ns, checkpoint_id, task_id, task_path, idx, channel, type_, blob, thread_id)
            for idx, channel, type_, blob in rows
        ]
        now = connections[self.using].ops.adapt_datetimefield_value(utcnow())
        cur = self._sqlite_cursor()
        try:
            with write_transaction(self.using):
                cur.execute(TOUCH_THREAD, {"thread_id": thread_id, "now": now})
                cur.executemany(sql, args)
        finally:
            cur.close()

    def _get_rows_sqlite(self, params: dict) -> list[tuple]:
        sql = GET_BY_ID_ONE if params["checkpoint_id"] else GET_LATEST_ONE
        cur = self._sqlite_cursor()
        try:
            found = cur.execute(sql, params).fetchall()
        finally:
            cur.close()
        row, blobs, writes = None, [], []
        for kind, *cells in found:
            if kind == 0:
                row = cells
            elif kind == 1:
                blobs.append(cells[:3])
            else:
                writes.append(cells[:6])
        return [] if row is None else [(*row, blobs, writes)]

    def _page_sqlite(self, params, wanted, cursor, size) -> list[tuple]:
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

    def _sqlite_durability(self) -> str:
        """What this connection's ``synchronous`` gives a commit: "disk" when each commit is
        synced (FULL, EXTRA), else "os" (it survives the process, not a power loss or an OS
        crash); "memory" for an in-memory database."""
        conn = connections[self.using]
        name = str(conn.settings_dict.get("NAME") or "")
        if name in ("", ":memory:") or "mode=memory" in name or conn.is_in_memory_db():
            return "memory"
        with conn.cursor() as cur:
            cur.execute("PRAGMA synchronous")
            level = cur.fetchone()[0]
        # 2 is FULL, 3 EXTRA; NORMAL (1) syncs the WAL only at checkpoints.
        return "disk" if level >= 2 else "os"
