"""The PostgreSQL saver's statements, each written whole, their parameters, and the libpq
path the put and the writes go out on.

One subject: what the saver sends to PostgreSQL. A statement, the arrays its parameters
are packed into and the way it is sent are read together when following a put, so they
are kept in one module (the pooled connection lending is `pool`).

Each is one statement, so a put, a get_tuple or a page of list costs one round trip; the
ORM would spend three to five. Table and column names are the Django models'. The writing
statements share their thread upsert, checkpoint columns, conflict rule and durability
level: each is spelled out in every statement that uses it, and
tests/checkpoints/store/test_postgres_sql.py holds the copies equal.

The direct path. psycopg's cursor is general: each ``execute`` builds a query object,
looks a dumper up for each parameter, consults its prepared-statement cache and walks its
result machinery: ~15-25 us of CPU a statement beside a round trip of ~30
(`bench.per_call postgres`: a put 235-240 -> 194-217 us, the writes 172-182 -> 144-161;
bench/README). A put and the writes run once each per graph step, so here each is
converted to libpq's ``$n`` form once (`Statement`), its parameters are encoded by their
type (`encode`), and it goes out with `PGconn.send_query_prepared` (or unnamed where named
statements are not allowed), waited on with psycopg's own generator (`run`, `arun`); a
failure raises psycopg's own exception for it. A connection in a transaction, or not
speaking UTF-8, or a parameter of a type not encoded here, takes the cursor instead
(`encode` says so). The reads (get_tuple, a page of list) go the same way and ask for
their rows in binary, loaded by psycopg's own loaders (`Statement`'s ``rows``): a legacy
get latest 1.48-1.54x -> 1.58-1.63x PostgresSaver's (`bench.legacy`, bench/README).

The arrays (`TextArray`, `ByteaArray`, `Int4Array`) go in binary without psycopg's
generic list adapter, on this path and the cursor's alike. psycopg adapts a plain list by
looking at its elements to choose a dumper, then dumps each element through it; for the
four arrays a put or put_writes sends, that was a quarter of the saver's CPU in a graph
turn (`python -m bench.e2e_split postgres`). The statements cast each array
(``%(blobs)s::bytea[]``), so the element type is known here: these lists say which it is
and are packed straight into PostgreSQL's binary array format. The parameter goes out
untyped (oid 0) and the server takes the cast's type, so the registration below changes
nothing for any other list or connection.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Callable
from datetime import datetime

import psycopg
from psycopg import errors, generators
from psycopg._encodings import conn_encoding
from psycopg.adapt import Dumper, Transformer
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.types.json import Jsonb

from checkpoints.channels import TASKS
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.metadata import exact_filter
from checkpoints.store.planning.writes import WritesPlan

# The durability level this session commits with, computed by the statement that writes
# the checkpoint: the stamp says what held for that very write, even after the server's
# configuration (a standby removed, synchronous_commit changed) or the connection changed.
# PUT and PUT_BATCH compute it in place (the same text).
LEVEL = """(CASE
    WHEN current_setting('fsync') <> 'on' OR current_setting('synchronous_commit') = 'off'
        THEN 'memory'
    WHEN current_setting('synchronous_standby_names') <> ''
         AND current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')
        THEN 'replicated'
    ELSE 'disk' END)"""

READ_LEVEL = "SELECT " + LEVEL

# One statement writes the thread row (its last write moved, an owner kept once set), the
# new channel blobs and the checkpoint (a re-put replaces it whole), stamped with LEVEL.
PUT = """
WITH t AS (
    INSERT INTO checkpoints_thread (thread_id, owner_id, created_at, last_write_at, version)
    VALUES (%(thread_id)s, %(owner_id)s, %(now)s, %(now)s, 1)
    ON CONFLICT (thread_id) DO UPDATE SET last_write_at = EXCLUDED.last_write_at,
        owner_id = COALESCE(checkpoints_thread.owner_id, EXCLUDED.owner_id)
    RETURNING id
), b AS (
    INSERT INTO checkpoints_channelblob (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT t.id, %(ns)s, x.channel, x.version, x.type, x.blob
    FROM t, unnest(%(channels)s::text[], %(versions)s::text[], %(types)s::text[],
                   %(blobs)s::bytea[]) AS x(channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)
INSERT INTO checkpoints_checkpoint (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    channel_versions, metadata, source, step, run_id, durability, created_at
)
SELECT t.id, %(ns)s, %(checkpoint_id)s, %(parent_id)s, %(type)s, %(body)s,
       %(channel_versions)s::jsonb, %(metadata)s::jsonb, %(source)s, %(step)s, %(run_id)s,
       (CASE
    WHEN current_setting('fsync') <> 'on' OR current_setting('synchronous_commit') = 'off'
        THEN 'memory'
    WHEN current_setting('synchronous_standby_names') <> ''
         AND current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')
        THEN 'replicated'
    ELSE 'disk' END), %(now)s
FROM t
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, channel_versions = EXCLUDED.channel_versions,
    metadata = EXCLUDED.metadata, source = EXCLUDED.source, step = EXCLUDED.step,
    run_id = EXCLUDED.run_id, durability = EXCLUDED.durability,
    created_at = EXCLUDED.created_at
RETURNING thread_id, durability
"""

# One statement writes a whole batch of one thread (an import's): the thread row, every
# new blob, every write and every checkpoint, each table's rows as parallel arrays. Write
# slots already held are kept (the batch writes threads an import found absent).
PUT_BATCH = """
WITH t AS (
    INSERT INTO checkpoints_thread (thread_id, owner_id, created_at, last_write_at, version)
    VALUES (%(thread_id)s, %(owner_id)s, %(now)s, %(now)s, 1)
    ON CONFLICT (thread_id) DO UPDATE SET last_write_at = EXCLUDED.last_write_at,
        owner_id = COALESCE(checkpoints_thread.owner_id, EXCLUDED.owner_id)
    RETURNING id
), b AS (
    INSERT INTO checkpoints_channelblob (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT t.id, x.ns, x.channel, x.version, x.type, x.blob
    FROM t, unnest(%(b_ns)s::text[], %(b_channels)s::text[], %(b_versions)s::text[],
                   %(b_types)s::text[], %(b_blobs)s::bytea[])
         AS x(ns, channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), w AS (
    INSERT INTO checkpoints_pendingwrite (
        thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
    )
    SELECT t.id, x.ns, x.checkpoint_id, x.task_id, x.task_path, x.idx, x.channel, x.type,
           x.blob
    FROM t, unnest(%(w_ns)s::text[], %(w_ids)s::text[], %(w_tasks)s::text[],
                   %(w_paths)s::text[], %(w_idxs)s::int[], %(w_channels)s::text[],
                   %(w_types)s::text[], %(w_blobs)s::bytea[])
         AS x(ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
)
INSERT INTO checkpoints_checkpoint (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    channel_versions, metadata, source, step, run_id, durability, created_at
)
SELECT t.id, x.ns, x.checkpoint_id, x.parent_id, x.type, x.body, x.versions::jsonb,
       x.metadata::jsonb, x.source, x.step, x.run_id, (CASE
    WHEN current_setting('fsync') <> 'on' OR current_setting('synchronous_commit') = 'off'
        THEN 'memory'
    WHEN current_setting('synchronous_standby_names') <> ''
         AND current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')
        THEN 'replicated'
    ELSE 'disk' END), x.created_at::timestamptz
FROM t, unnest(%(c_ns)s::text[], %(c_ids)s::text[], %(c_parents)s::text[],
               %(c_types)s::text[], %(c_bodies)s::bytea[], %(c_versions)s::text[],
               %(c_metadata)s::text[], %(c_sources)s::text[], %(c_steps)s::int[],
               %(c_runs)s::text[], %(c_created)s::text[])
     AS x(ns, checkpoint_id, parent_id, type, body, versions, metadata, source, step, run_id,
          created_at)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, channel_versions = EXCLUDED.channel_versions,
    metadata = EXCLUDED.metadata, source = EXCLUDED.source, step = EXCLUDED.step,
    run_id = EXCLUDED.run_id, durability = EXCLUDED.durability,
    created_at = EXCLUDED.created_at
RETURNING durability
"""

# The columns every read returns, with the checkpoint's blobs and pending writes folded
# into two arrays (channel and type names as bytea, so one array type holds them), and a
# checkpoint from before format v4 its parent's pending sends, a third (as PostgresSaver's
# pending_sends subquery once did): one statement a read, legacy or not. Reads add their
# WHERE to it, as LangGraph's PostgresSaver adds its own to its SELECT_SQL.
SELECT = f"""
SELECT c.id, c.thread_id, t.thread_id, c.checkpoint_ns, c.checkpoint_id,
       c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata, c.channel_versions,
       (SELECT array_agg(array[convert_to(b.channel, 'UTF8'), convert_to(b.type, 'UTF8'), b.blob])
          -- A column that is no object (written by hand) joins nothing: the reader refuses it.
          FROM jsonb_each_text(CASE WHEN jsonb_typeof(c.channel_versions) = 'object'
                                    THEN c.channel_versions END) AS v(channel, version)
          -- One probe of the blob key per channel, never a scan of the thread's blobs.
          CROSS JOIN LATERAL (
              SELECT bb.channel, bb.type, bb.blob FROM checkpoints_channelblob bb
               WHERE bb.thread_id = c.thread_id AND bb.checkpoint_ns = c.checkpoint_ns
                 AND bb.channel = v.channel AND bb.version = v.version AND bb.type <> 'empty'
               LIMIT 1
          ) AS b) AS blobs,
       (SELECT array_agg(array[convert_to(w.task_id, 'UTF8'), convert_to(w.task_path, 'UTF8'),
                               convert_to(w.idx::text, 'UTF8'), convert_to(w.channel, 'UTF8'),
                               convert_to(w.type, 'UTF8'), w.blob])
          FROM checkpoints_pendingwrite w
         WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
           AND w.checkpoint_id = c.checkpoint_id) AS writes,
       (SELECT array_agg(array[convert_to(s.task_id, 'UTF8'), convert_to(s.idx::text, 'UTF8'),
                               convert_to(s.type, 'UTF8'), s.blob]
                         ORDER BY s.task_path, s.task_id, s.idx)
          FROM checkpoints_pendingwrite s
         -- Only a row that may be from before format v4 (no TASKS channel of its own) reads
         -- its parent's sends (`planning.parent_sends`, which decides): a one-time filter,
         -- so any other row pays no probe.
         WHERE c.parent_checkpoint_id IS NOT NULL
           AND NOT coalesce(jsonb_exists(c.channel_versions, '{TASKS}'), false)
           AND s.thread_id = c.thread_id AND s.checkpoint_ns = c.checkpoint_ns
           AND s.checkpoint_id = c.parent_checkpoint_id
           AND s.channel = '{TASKS}') AS sends
FROM checkpoints_checkpoint c
JOIN checkpoints_thread t ON t.id = c.thread_id
"""

# The thread's key is looked up first, so the planner walks checkpoint_key backwards.
_THREAD = "c.thread_id = (SELECT id FROM checkpoints_thread WHERE thread_id = %(thread_id)s)"

GET_LATEST = (
    SELECT
    + f"""WHERE {_THREAD} AND c.checkpoint_ns = %(ns)s
ORDER BY c.checkpoint_id DESC LIMIT 1"""
)

GET_BY_ID = (
    SELECT
    + f"""WHERE {_THREAD} AND c.checkpoint_ns = %(ns)s
  AND c.checkpoint_id = %(checkpoint_id)s"""
)


def list_page(
    *, thread: bool, ns: bool, checkpoint_id: bool, before: bool, metadata: bool, cursor: bool
) -> str:
    """The list query for the given filters; every value is a bound parameter."""
    where = []
    if thread:
        where.append(_THREAD)
    if ns:
        where.append("c.checkpoint_ns = %(ns)s")
    if checkpoint_id:
        where.append("c.checkpoint_id = %(checkpoint_id)s")
    if before:
        where.append("c.checkpoint_id < %(before)s")
    if metadata:
        # Containment uses the GIN index; the caller confirms exact equality.
        where.append("c.metadata @> %(metadata)s::jsonb")
    if cursor:
        where.append("(c.checkpoint_id, c.id) < (%(cursor_id)s, %(cursor_pk)s)")
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    return SELECT + clause + "\nORDER BY c.checkpoint_id DESC, c.id DESC LIMIT %(limit)s"


# One statement stores a task's writes: regular writes never overwrite an existing row
# (PUT_WRITES_KEEP), special ones (errors, interrupts...) replace it (PUT_WRITES_REPLACE).
# A thread with no row yet gets one here (LangGraph may store a run's input writes before
# its first checkpoint): handing that case to the ORM cost a Django connection per
# LangGraph worker thread, about 1.5 ms.
PUT_WRITES_KEEP = """
WITH found AS (
    SELECT id FROM checkpoints_thread WHERE thread_id = %(thread_id)s
), touched AS (
    -- A write moves the thread's last write, so a sweep that judged the thread before it
    -- keeps it (DELETE_UNWRITTEN); one that deleted it first fails this statement's
    -- foreign key instead, and nothing is acknowledged.
    UPDATE checkpoints_thread SET last_write_at = %(now)s
    WHERE id = (SELECT id FROM found) AND last_write_at < %(now)s
), made AS (
    INSERT INTO checkpoints_thread (thread_id, created_at, last_write_at, version)
    SELECT %(thread_id)s, %(now)s, %(now)s, 1 WHERE NOT EXISTS (SELECT 1 FROM found)
    -- A writer that made the row since this statement's snapshot: take its id.
    ON CONFLICT (thread_id) DO UPDATE SET thread_id = EXCLUDED.thread_id
    RETURNING id
), t AS (
    SELECT id FROM found UNION ALL SELECT id FROM made
)
INSERT INTO checkpoints_pendingwrite (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
)
SELECT t.id, %(ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s, x.idx, x.channel, x.type,
       x.blob
FROM t, unnest(%(idxs)s::int[], %(channels)s::text[], %(types)s::text[], %(blobs)s::bytea[])
     AS x(idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
"""

# PUT_WRITES_KEEP, a slot already held replaced.
PUT_WRITES_REPLACE = """
WITH found AS (
    SELECT id FROM checkpoints_thread WHERE thread_id = %(thread_id)s
), touched AS (
    UPDATE checkpoints_thread SET last_write_at = %(now)s
    WHERE id = (SELECT id FROM found) AND last_write_at < %(now)s
), made AS (
    INSERT INTO checkpoints_thread (thread_id, created_at, last_write_at, version)
    SELECT %(thread_id)s, %(now)s, %(now)s, 1 WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (thread_id) DO UPDATE SET thread_id = EXCLUDED.thread_id
    RETURNING id
), t AS (
    SELECT id FROM found UNION ALL SELECT id FROM made
)
INSERT INTO checkpoints_pendingwrite (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
)
SELECT t.id, %(ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s, x.idx, x.channel, x.type,
       x.blob
FROM t, unnest(%(idxs)s::int[], %(channels)s::text[], %(types)s::text[], %(blobs)s::bytea[])
     AS x(idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
    task_path = EXCLUDED.task_path
"""

# Deletes threads whole, and their finished-marks, in one statement (one round trip, one
# commit). The checkpoints, blobs and pending writes go with their thread rows by the
# foreign keys' ON DELETE CASCADE (migration 0009): deleting them here as well left the
# keys to check every child table again for each thread at commit (0.167 -> 0.090 ms of
# execution a delete_thread, 52 -> 28 ms a sweep batch of 1,000 threads).
#
# A thread a writer re-creates after this statement's snapshot survives it: that write
# came after the delete (a put racing the delete lands on either side of it). A second
# statement looking for threads re-created between the two (the old AFTER_DELETE) cost a
# round trip and a commit, 0.4 ms of a 2 ms delete_thread, and only narrowed that window,
# never closed it: a put landing just after the check survived all the same.
#
# DELETE_THREAD is the same statement for one thread (delete_thread), matched by ``=``: an
# array parameter keeps the prepared statement on custom plans, planned again at every run
# (its generic plan's estimate for ``= ANY($1)`` never wins), which was 0.2 ms of a 0.9 ms
# delete_thread; with a scalar the generic plan holds from a connection's sixth run on (the
# first five are PostgreSQL's custom plans: 0.17 ms more each, on every pooled connection).
DELETE_THREADS = """
WITH t AS (
    DELETE FROM checkpoints_thread WHERE thread_id = ANY(%(ids)s) RETURNING id, thread_id
), marks AS (
    DELETE FROM checkpoints_finishedmark WHERE thread_id = ANY(%(ids)s)
)
SELECT thread_id FROM t
"""

DELETE_THREAD = """
WITH t AS (
    DELETE FROM checkpoints_thread WHERE thread_id = %(id)s RETURNING id, thread_id
), marks AS (
    DELETE FROM checkpoints_finishedmark WHERE thread_id = %(id)s
)
SELECT thread_id FROM t
"""

# The sweep's delete (`StoreSaver.delete_threads_unwritten`): a thread goes only if its row
# still carries the last write the sweep judged it on. A put racing it either commits first
# (the row's last_write_at moved: READ COMMITTED re-checks the condition on the row's new
# version, so it is kept) or waits on the row lock and re-creates the thread afterwards.
# ``absent`` are threads judged with no row: their marks go unless a row exists now.
# Returns (thread id, deleted): deleted ones, then absent ones that now have a row.
DELETE_UNWRITTEN = """
WITH j AS (
    SELECT x.thread_id, x.last_write::timestamptz AS last_write_at
    FROM unnest(%(ids)s::text[], %(writes)s::text[]) AS x(thread_id, last_write)
), t AS (
    DELETE FROM checkpoints_thread x USING j
    WHERE x.thread_id = j.thread_id AND x.last_write_at = j.last_write_at
    RETURNING x.id, x.thread_id
), now_present AS (
    SELECT thread_id FROM checkpoints_thread WHERE thread_id = ANY(%(absent)s::text[])
), marks AS (
    DELETE FROM checkpoints_finishedmark m
    WHERE m.thread_id IN (SELECT thread_id FROM t)
       OR (m.thread_id = ANY(%(absent)s::text[])
           AND m.thread_id NOT IN (SELECT thread_id FROM now_present))
)
SELECT thread_id, true FROM t
UNION ALL SELECT thread_id, false FROM now_present
"""


def put_params(row: dict, blobs: list[tuple]) -> dict:
    """PUT's parameters: the stamped row, its new blobs as parallel arrays."""
    return dict(
        row,
        channel_versions=Jsonb(row["channel_versions"]),
        metadata=Jsonb(row["metadata"]),
        channels=TextArray(b[0] for b in blobs),
        versions=TextArray(b[1] for b in blobs),
        types=TextArray(b[2] for b in blobs),
        blobs=ByteaArray(b[3] for b in blobs),
    )


def batch_params(thread_id: str, owner_id, rows: list[tuple[dict, list]], writes) -> dict:
    """PUT_BATCH's arrays: ``rows`` are (stamped checkpoint row, its blobs), ``writes``
    (ns, checkpoint id, task id, task path, idx, channel, type, bytes)."""
    blobs = [(row["ns"], *blob) for row, row_blobs in rows for blob in row_blobs]
    checkpoints = [row for row, _ in rows]
    return {
        "thread_id": thread_id,
        "owner_id": owner_id,
        "now": utcnow(),
        "b_ns": TextArray(b[0] for b in blobs),
        "b_channels": TextArray(b[1] for b in blobs),
        "b_versions": TextArray(b[2] for b in blobs),
        "b_types": TextArray(b[3] for b in blobs),
        "b_blobs": ByteaArray(b[4] for b in blobs),
        "w_ns": TextArray(w[0] for w in writes),
        "w_ids": TextArray(w[1] for w in writes),
        "w_tasks": TextArray(w[2] for w in writes),
        "w_paths": TextArray(w[3] for w in writes),
        "w_idxs": Int4Array(w[4] for w in writes),
        "w_channels": TextArray(w[5] for w in writes),
        "w_types": TextArray(w[6] for w in writes),
        "w_blobs": ByteaArray(w[7] for w in writes),
        "c_ns": TextArray(r["ns"] for r in checkpoints),
        "c_ids": TextArray(r["checkpoint_id"] for r in checkpoints),
        "c_parents": TextArray(r["parent_id"] for r in checkpoints),
        "c_types": TextArray(r["type"] for r in checkpoints),
        "c_bodies": ByteaArray(r["body"] for r in checkpoints),
        "c_versions": TextArray(json.dumps(r["channel_versions"]) for r in checkpoints),
        "c_metadata": TextArray(json.dumps(r["metadata"]) for r in checkpoints),
        "c_sources": TextArray(r["source"] for r in checkpoints),
        "c_steps": Int4Array(r["step"] for r in checkpoints),
        "c_runs": TextArray(r["run_id"] for r in checkpoints),
        "c_created": TextArray(r["now"].isoformat() for r in checkpoints),
    }


def writes_statement(plan: WritesPlan, rows: list[tuple]) -> tuple[str, dict]:
    """A task's encoded writes ``rows`` (idx, channel, type, bytes): the statement (keep or
    replace held slots) and its parameters."""
    params = {
        "thread_id": plan.thread_id,
        "now": utcnow(),
        "ns": plan.ns,
        "checkpoint_id": plan.checkpoint_id,
        "task_id": plan.task_id,
        "task_path": plan.task_path,
        "idxs": Int4Array(r[0] for r in rows),
        "channels": TextArray(r[1] for r in rows),
        "types": TextArray(r[2] for r in rows),
        "blobs": ByteaArray(r[3] for r in rows),
    }
    return (PUT_WRITES_REPLACE if plan.special else PUT_WRITES_KEEP), params


def page_statement(params, wanted, cursor, size) -> tuple[str, dict]:
    """A page of list: its statement (`list_page`) and parameters."""
    sql = list_page(
        thread=params.get("thread_id") is not None,
        ns=params.get("ns") is not None,
        checkpoint_id=params.get("checkpoint_id") is not None,
        before=params.get("before") is not None,
        metadata=bool(exact_filter(wanted)),
        cursor=cursor is not None,
    )
    # Dotted keys may be paths: matched after the query (planning.metadata_matches).
    exact = exact_filter(wanted)
    values = dict(params, limit=size, metadata=Jsonb(exact) if exact else None)
    if cursor is not None:
        values["cursor_id"], values["cursor_pk"] = cursor
    return sql, values


# -- arrays -------------------------------------------------------------------------------
_HEADER = struct.Struct("!iiiii")  # ndim, has nulls, element oid, length, lower bound
_LENGTH = struct.Struct("!i")
pack_int4 = struct.Struct("!i").pack
TEXT_OID, BYTEA_OID, INT4_OID = 25, 17, 23


class TextArray(list):
    """A list of str sent as ``text[]``."""

    # Its binary form made ahead (`pack_params`), text as UTF-8.
    packed: bytes | None = None


class ByteaArray(list):
    """A list of bytes sent as ``bytea[]``."""

    packed: bytes | None = None


class Int4Array(list):
    """A list of int sent as ``int4[]``."""

    packed: bytes | None = None


def pack_array(items, oid: int, encode) -> bytes:
    """``items`` in PostgreSQL's binary format of a one-dimensional array of ``oid``."""
    parts = [_HEADER.pack(1, int(None in items), oid, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(_LENGTH.pack(-1))
            continue
        data = encode(item)
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


_PACKING = {
    TextArray: (TEXT_OID, _utf8),
    ByteaArray: (BYTEA_OID, bytes),
    Int4Array: (INT4_OID, pack_int4),
}


def pack_params(params: dict) -> dict:
    """``params`` with each array's binary form made now: the work its dumper would do as
    the statement is sent, done where the caller prepares the statement (an import's
    read-ahead thread). A connection whose encoding is not UTF-8 packs its text again,
    and one without our dumpers sends the lists as psycopg does any list."""
    for value in params.values():
        packing = _PACKING.get(type(value))
        if packing is not None:
            value.packed = pack_array(value, *packing)
    return params


class _ArrayDumper(Dumper):
    format = Format.BINARY
    oid = 0  # untyped: the statement's cast names the type


class TextArrayDumper(_ArrayDumper):
    def __init__(self, cls, context=None):
        super().__init__(cls, context)
        encoding = conn_encoding(self.connection)
        self._utf8 = encoding == "utf-8"
        self._encode = lambda text: text.encode(encoding)

    def dump(self, obj):
        if obj.packed is not None and self._utf8:
            return obj.packed
        return pack_array(obj, TEXT_OID, self._encode)


class ByteaArrayDumper(_ArrayDumper):
    def dump(self, obj):
        if obj.packed is not None:
            return obj.packed
        return pack_array(obj, BYTEA_OID, bytes)


class Int4ArrayDumper(_ArrayDumper):
    def dump(self, obj):
        if obj.packed is not None:
            return obj.packed
        return pack_array(obj, INT4_OID, pack_int4)


psycopg.adapters.register_dumper(TextArray, TextArrayDumper)
psycopg.adapters.register_dumper(ByteaArray, ByteaArrayDumper)
psycopg.adapters.register_dumper(Int4Array, Int4ArrayDumper)


# -- the direct path ---------------------------------------------------------------------------
_PARAMETER = re.compile(r"%\((\w+)\)s")
# What this module prepared on a connection, kept on the connection itself.
_PREPARED = "_checkpoints_prepared"
# The transformer a connection only the store uses loads its reads' rows with (`_all_rows`).
_LOADER = "_checkpoints_loader"
_FAILED = (ExecStatus.FATAL_ERROR, ExecStatus.BAD_RESPONSE)
_IDLE = TransactionStatus.IDLE


class Statement:
    """One statement in libpq's ``$n`` form, named on the server by a digest of its text
    (never psycopg's ``_pg3_N``, so the two cannot take each other's name).

    A write's answer is its first row, in text: ``columns`` turn its values into Python
    ones. A read (``rows``) asks for every row in binary and loads them with psycopg's own
    loaders: the rows a cursor's ``fetchall`` would give, without the cursor (`_all_rows`).
    """

    __slots__ = ("sql", "query", "names", "name", "columns", "rows", "result_format")

    def __init__(
        self, sql: str, columns: tuple[Callable[[bytes], object], ...] = (), *, rows=False
    ):
        if "%%" in sql:
            raise ValueError("a direct statement holds no literal '%'")
        if rows and columns:
            raise ValueError("a read's rows are loaded by psycopg: it names no columns")
        names: list[str] = []

        def number(match: re.Match) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        self.sql = sql
        self.query = _PARAMETER.sub(number, sql).encode()
        self.names = tuple(names)
        self.name = b"checkpoints_" + hashlib.sha1(self.query).hexdigest()[:24].encode()
        self.columns = columns
        self.rows = rows
        self.result_format = Format.BINARY if rows else Format.TEXT


def usable(conn) -> bool:
    """Whether ``conn`` can take a statement here: autocommit, idle, in UTF-8."""
    pgconn = conn.pgconn
    return (
        conn.autocommit
        and pgconn.transaction_status == _IDLE
        and pgconn.parameter_status(b"client_encoding") == b"UTF8"
    )


def _text(value: str) -> bytes:
    if "\x00" in value:
        # psycopg's own refusal: libpq would end the text at the NUL and store the rest.
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return value.encode()


def encode(statement: Statement, params: dict) -> tuple[list, list] | None:
    """The parameter values and formats, or None if one is of a type not encoded here."""
    values: list = []
    formats: list = []
    for name in statement.names:
        value = params[name]
        kind = type(value)
        if kind is str:
            values.append(_text(value))
            formats.append(0)
        elif value is None:
            values.append(None)
            formats.append(0)
        elif kind is bytes:
            values.append(value)
            formats.append(1)
        elif kind is int:
            values.append(str(value).encode())
            formats.append(0)
        elif kind is TextArray:
            # Binary arrays carry lengths: a NUL reaches the server, which refuses it.
            values.append(pack_array(value, TEXT_OID, str.encode))
            formats.append(1)
        elif kind is ByteaArray:
            values.append(pack_array(value, BYTEA_OID, bytes))
            formats.append(1)
        elif kind is Int4Array:
            values.append(pack_array(value, INT4_OID, pack_int4))
            formats.append(1)
        elif kind is Jsonb:
            # JSON escapes a NUL; the server refuses "\u0000" in jsonb as it would anyway.
            values.append((value.dumps or json.dumps)(value.obj).encode())
            formats.append(0)
        elif kind is datetime and value.tzinfo is not None:
            values.append(value.isoformat().encode())
            formats.append(0)
        else:
            return None
    return values, formats


def _prepare_or_send(conn, statement: Statement, values, formats, prepare: bool) -> bool:
    """Send the statement; True when it must be prepared first (the caller waits for that)."""
    pgconn = conn.pgconn
    if not prepare:
        pgconn.send_query_params(
            statement.query, values, None, formats, result_format=statement.result_format
        )
        return False
    prepared = conn.__dict__.get(_PREPARED)
    if prepared is not None and statement.name in prepared:
        _send_prepared(conn, statement, values, formats)
        return False
    pgconn.send_prepare(statement.name, statement.query)
    # Marked before the answer: a call interrupted while it waits (a cancelled task, a
    # timeout) may leave the server holding the statement, and preparing it again would
    # be refused as a pooler's clash is, ending prepared statements for the process. One
    # marked but not held is prepared again when the server says so (`_session_dropped`).
    _prepared(conn, statement)
    return True


def _send_prepared(conn, statement: Statement, values, formats) -> None:
    conn.pgconn.send_query_prepared(
        statement.name, values, formats, result_format=statement.result_format
    )


def _prepared(conn, statement: Statement) -> None:
    conn.__dict__.setdefault(_PREPARED, set()).add(statement.name)


def _prepare_answered(conn, results: list, statement: Statement) -> None:
    """The prepare's answer: a refusal means the server holds no such statement for us."""
    try:
        _check(conn, results)
    except psycopg.Error:
        conn.__dict__.get(_PREPARED, set()).discard(statement.name)
        raise


def _check(conn, results: list) -> None:
    for result in results:
        if result.status in _FAILED:
            raise errors.error_from_result(result, encoding=conn.info.encoding)


def _answer(conn, statement: Statement, results: list, kept: bool):
    """A read's rows; a write's first row (or None)."""
    _check(conn, results)
    if statement.rows:
        return _all_rows(conn, results[-1], kept)
    if not statement.columns:
        return None
    result = results[-1]
    if not result.ntuples:
        return None
    return tuple(
        None if (raw := result.get_value(0, i)) is None else load(raw)
        for i, load in enumerate(statement.columns)
    )


def _all_rows(conn, result, kept: bool) -> list[tuple]:
    """Every row of ``result``, as a cursor's ``fetchall`` loads them, through a transformer
    of the connection's loaders (each column's picked by ``set_pgresult``, as a cursor's).

    ``kept``: a connection only the store uses (its pool's) keeps its transformer, and with
    it the loaders made at its first read, as the cursor it kept per statement did: a
    transformer made per read cost a legacy get latest 6 % (`bench.legacy`, bench/README).
    Any other connection (Django's, which a project may register loaders on) gets one per
    read, with the loaders it has then."""
    tx = conn.__dict__.get(_LOADER) if kept else None
    if tx is None:
        tx = Transformer(conn)
        if kept:
            conn.__dict__[_LOADER] = tx
    tx.set_pgresult(result, format=Format.BINARY)
    try:
        return tx.load_rows(0, result.ntuples, tuple)
    finally:
        # An idle connection holds no result (a large document's would stay in memory).
        tx.set_pgresult(None)


def run(
    conn, statement: Statement, encoded: tuple[list, list], *, prepare: bool, kept: bool = False
):
    """Run ``statement`` with `encode`'s values on ``conn``: a read's rows, a write's first
    row (or None). ``kept``: ``conn`` is one only the store uses (`_all_rows`)."""
    values, formats = encoded
    with conn.lock:
        if _prepare_or_send(conn, statement, values, formats, prepare):
            _prepare_answered(conn, conn.wait(generators.execute(conn.pgconn)), statement)
            _send_prepared(conn, statement, values, formats)
        return _answer(conn, statement, conn.wait(generators.execute(conn.pgconn)), kept)


async def arun(
    conn, statement: Statement, encoded: tuple[list, list], *, prepare: bool, kept: bool = False
):
    """`run` on an AsyncConnection."""
    values, formats = encoded
    async with conn.lock:
        if _prepare_or_send(conn, statement, values, formats, prepare):
            _prepare_answered(conn, await conn.wait(generators.execute(conn.pgconn)), statement)
            _send_prepared(conn, statement, values, formats)
        results = await conn.wait(generators.execute(conn.pgconn))
        return _answer(conn, statement, results, kept)


def forget_prepared(conn) -> None:
    """The server no longer holds (or never held) what this connection prepared here."""
    conn.__dict__.pop(_PREPARED, None)
