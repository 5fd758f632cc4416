"""The SQLite statements of the ORM saver's hot paths.

SQLite runs in the process, so round trips cost little; what cost the time was building
ORM queries (about 2 ms a read). These run on Django's own sqlite3 connection, inside
whatever transaction Django holds, with the same tables and column formats.
"""

from __future__ import annotations

import json

from checkpoints.channels import TASKS

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

# get_tuple in one statement: the checkpoint row (kind 0), then its blobs (kind 1), its
# pending writes (kind 2) and, for a checkpoint from before format v4, its parent's pending
# sends (kind 3, `planning.parent_sends`), padded to the row's width; one round through
# SQLite, not four.
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
UNION ALL
SELECT 3, s.task_path, s.task_id, s.idx, s.type, s.blob, NULL, NULL, NULL, NULL, NULL
FROM c CROSS JOIN checkpoints_pendingwrite s
  ON s.thread_id = c.thread_pk AND s.checkpoint_ns = c.checkpoint_ns
 AND s.checkpoint_id = c.parent_checkpoint_id AND s.channel = '{tasks}'
WHERE {legacy}
"""
# Which rows may be from before format v4 and read their parent's sends: those with a
# parent and no TASKS channel of their own (the reader's `needs_parent_sends` decides).
_LEGACY = (
    f"c.parent_checkpoint_id IS NOT NULL AND json_type(c.channel_versions, '$.\"{TASKS}\"') IS NULL"
)
GET_LATEST_ONE = _ONE.format(
    where=f"{_THREAD} AND c.checkpoint_ns = :ns ORDER BY c.checkpoint_id DESC LIMIT 1",
    legacy=_LEGACY,
    tasks=TASKS,
)
GET_BY_ID_ONE = _ONE.format(
    where=f"{_THREAD} AND c.checkpoint_ns = :ns AND c.checkpoint_id = :checkpoint_id",
    legacy=_LEGACY,
    tasks=TASKS,
)

# A listed row's pending writes (kind 0) and, for one from before format v4, its parent's
# pending sends (kind 1), in one statement.
WRITES = f"""
SELECT 0, task_id, task_path, idx, channel, type, blob FROM checkpoints_pendingwrite
WHERE thread_id = :thread_pk AND checkpoint_ns = :ns AND checkpoint_id = :checkpoint_id
UNION ALL
SELECT 1, task_id, task_path, idx, channel, type, blob FROM checkpoints_pendingwrite
WHERE :parent_id IS NOT NULL AND json_type(:versions, '$."{TASKS}"') IS NULL
  AND thread_id = :thread_pk AND checkpoint_ns = :ns AND checkpoint_id = :parent_id
  AND channel = '{TASKS}'
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
        found = cur.execute(
            WRITES,
            {
                "thread_pk": tpk,
                "ns": ns,
                "checkpoint_id": cid,
                "parent_id": row[5],
                "versions": versions,
            },
        ).fetchall()
        writes = [w[1:] for w in found if w[0] == 0]
        sends = parent_sends(w[1:] for w in found if w[0] == 1)
        out.append((*row, blobs, writes, sends))
    return out


def parent_sends(rows) -> list[tuple]:
    """(task id, idx, type, bytes) of the parent's sends, from rows of (task id, task path,
    idx, channel, type, bytes), in PostgresSaver's order: task path, task id, idx (SQLite
    compares text as bytes, as Python compares str)."""
    ordered = sorted(rows, key=lambda w: (w[1], w[0], w[2]))
    return [(w[0], w[2], w[4], w[5]) for w in ordered]
