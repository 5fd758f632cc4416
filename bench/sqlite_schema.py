"""What a SQLite schema change could gain, at the SQL level: `python -m bench.sqlite_schema`.

Replays one chat-like workload (threads of 200 steps: a ~300 B message appended to a
100-message list each step, 1-3 of 8 small channels changing, a 64-256 KB document about
every 25 steps, two pending writes after each put) as pre-serialized bytes against several
schemas with raw `sqlite3`, no Django and no decoding in the timed loop:

- ``ours``: the store's current tables (dumped from a `manage.py migrate`d file) and its
  current statements (imported from `checkpoints.store.sqlite.sql`);
- ``ours-noai``, ``ours-nocheck``, ``ours-nosrc``, ``ours-norun``, ``ours-noid``,
  ``ours-nothr``: ``ours`` less one part of its schema (AUTOINCREMENT, the JSON_VALID
  checks, one checkpoint index each); ``ours-bare``: less all of them;
- ``ours-inline``: ``ours`` plus two columns, every uncompressed value kept in the
  checkpoint row as JSON and carried from the parent's row by the upsert itself;
- ``keys``: natural keys, WITHOUT ROWID tables keyed by (thread_id text, ns, ...), no
  AUTOINCREMENT, no JSON CHECKs, the checkpoint table's only index ``run_id``; the thread
  row (kept, with its admin indexes) still upserted on every put and put_writes;
- ``lazy``: ``keys`` with the thread row written only when a field it holds changes (its
  first write, an owner, or a ``last_write_at`` older than ``--stale`` seconds);
- ``inline``: ``lazy`` with values up to ``--inline-bytes`` in the checkpoint row (one
  column holding every small channel's value); only larger values are blob rows;
- ``min``: ``inline`` without the ``run_id`` index (no index but the primary keys);
- ``rowid``, ``rowid-min``: ``keys`` and ``min`` as rowid tables whose natural key is the
  PRIMARY KEY's index (SqliteSaver's layout; what Django's CompositePrimaryKey makes), no
  AUTOINCREMENT; ``rowid-64k``: ``rowid-min`` with every value not compressed (up to 64 KB)
  inline, only compressed values (the documents) shared as blob rows;
- ``lg``: LangGraph's SqliteSaver's tables and statements.

Per variant: thread CPU and wall per put (BEGIN .. COMMIT), put_writes, get latest (the
row, its values and pending writes fetched, not decoded) and list(limit=50), medians of
calls interleaved across variants; WAL frames and bytes per commit (a separate pass with
``wal_autocheckpoint=0``); file bytes per checkpoint. At synchronous=FULL and NORMAL.
``--shape small`` is the e2e graph's regime: a 10-message window, no large value.

The workload's checkpoints are LangGraph's base `create_checkpoint` ones (format v2); only
their bytes are used here, so the saver's pre-v4 parent-sends query never runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from binascii import a2b_base64, b2a_base64
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import zstandard
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.utils import pending_writes_sql

from bench.workload import CHAT, ChatThread, DocumentPool, Shape
from checkpoints.store.sqlite import sql as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = "/tmp/bench_sqlite_schema"
COMPRESS_BYTES = 64 * 1024
# The inline thresholds the variants use: 1 KB (the small channels) and every value not
# compressed (the message list too; only documents over 64 KB stay shared blob rows).
INLINE_LIMITS = (1024, COMPRESS_BYTES)
SERDE = JsonPlusSerializer()
OUR_TABLES = ("thread", "checkpoint", "channelblob", "pendingwrite")


# -- the workload, pre-serialized ---------------------------------------------------------
def next_version(current, channel) -> str:
    """LangGraph's SQLite version strings (SqliteSaver.get_next_version)."""
    if current is None:
        n = 0
    elif isinstance(current, int):
        n = current
    else:
        n = int(current.split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


@dataclass
class Step:
    cid: str
    parent: str | None
    step: int
    source: str
    lg_type: str
    lg_body: bytes
    metadata: str
    body_type: str
    body: bytes
    versions: str  # every channel -> version (JSON)
    blobs: list[tuple]  # (channel, version, type, bytes) of the changed channels
    # Inline threshold -> (the blob rows' channels' versions (JSON), the new blob rows,
    # every small channel's current value packed into one column), for `inline` and after.
    split: dict[int, tuple[str, list[tuple], bytes]]
    task: str
    writes: list[tuple]  # (idx, channel, type, bytes)
    run_id: str = "run-1"


def _typed(value) -> tuple[str, bytes]:
    type_, data = SERDE.dumps_typed(value)
    if len(data) > COMPRESS_BYTES:
        return type_ + "+zstd", zstandard.ZstdCompressor(level=3).compress(data)
    return type_, data


def make_thread(name: str, steps: int, docs: DocumentPool, shape: Shape) -> list[Step]:
    th = ChatThread(name, next_version, docs, seed=name, shape=shape)
    out: list[Step] = []
    # Per inline threshold: the small values held in the row, the blob rows' versions.
    small: dict[int, dict[str, tuple[str, bytes]]] = {n: {} for n in INLINE_LIMITS}
    big_versions: dict[int, dict[str, str]] = {n: {} for n in INLINE_LIMITS}
    for _ in range(steps):
        parent = th.checkpoint["id"] if th.step >= 0 else None
        checkpoint, metadata, new_versions = th.advance()
        lg_type, lg_body = SERDE.dumps_typed(checkpoint)
        meta = json.dumps({**metadata, "thread_id": name}, ensure_ascii=False)
        body_type, body = SERDE.dumps_typed(
            {k: v for k, v in checkpoint.items() if k not in ("channel_values", "channel_versions")}
        )
        blobs = []
        big: dict[int, list[tuple]] = {n: [] for n in INLINE_LIMITS}
        for channel, version in new_versions.items():
            typed = _typed(checkpoint["channel_values"][channel])
            blobs.append((channel, str(version), *typed))
            for n in INLINE_LIMITS:
                if len(typed[1]) > n or typed[0].endswith("+zstd"):
                    big[n].append((channel, str(version), *typed))
                    big_versions[n][channel] = str(version)
                    small[n].pop(channel, None)
                else:
                    small[n][channel] = typed
                    big_versions[n].pop(channel, None)
        split = {
            n: (
                json.dumps(big_versions[n]),
                big[n],
                SERDE.dumps_typed({c: [t, b] for c, (t, b) in small[n].items()})[1],
            )
            for n in INLINE_LIMITS
        }
        writes, task = th.writes()
        wrows = [(i, c, *SERDE.dumps_typed(v)) for i, (c, v) in enumerate(writes)]
        out.append(
            Step(
                cid=checkpoint["id"],
                parent=parent,
                step=metadata["step"],
                source=metadata["source"],
                lg_type=lg_type,
                lg_body=lg_body,
                metadata=meta,
                body_type=body_type,
                body=body,
                versions=json.dumps(checkpoint["channel_versions"]),
                blobs=blobs,
                split=split,
                task=task,
                writes=wrows,
            )
        )
        th.commit(
            checkpoint,
            {"configurable": {**th.config["configurable"], "checkpoint_id": checkpoint["id"]}},
        )
    return out


def tid(i: int, run: str = "a") -> str:
    """A thread id as long as a UUID's text (the keys of the text-keyed variants hold it)."""
    return f"{i:08x}-{run:0>4}-4000-8000-{i * 7919:012x}"


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


# -- the variants -------------------------------------------------------------------------
def current_ddl() -> list[str]:
    """The store's tables and indexes as `manage.py migrate` makes them today."""
    path = os.path.join(WORK, "migrated.sqlite3")
    if not os.path.exists(path):
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{path}")
        env.pop("DJANGO_SETTINGS_MODULE", None)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
    conn = sqlite3.connect(path)
    names = tuple(f"checkpoints_{t}" for t in OUR_TABLES)
    rows = conn.execute(
        "SELECT type, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN "
        f"({','.join('?' * len(names))}) ORDER BY type DESC, tbl_name",
        names,
    ).fetchall()
    conn.close()
    # owner_id references auth_user (always NULL here): a stub parent table.
    return ["CREATE TABLE auth_user (id integer PRIMARY KEY AUTOINCREMENT)"] + [r[2] for r in rows]


THREAD_DDL = [
    # The thread table as it is (the admin lists and the sweep read it), minus AUTOINCREMENT.
    """CREATE TABLE thread (id integer PRIMARY KEY, thread_id text NOT NULL UNIQUE,
    created_at datetime NOT NULL, last_write_at datetime NOT NULL, version integer NOT NULL,
    waiting_minutes integer, finished_minutes integer, owner_id integer)""",
    "CREATE INDEX thread_last_write_id ON thread (last_write_at, id)",
    "CREATE INDEX thread_owner_write_id ON thread (owner_id, last_write_at, id)",
    """CREATE INDEX thread_declared_waiting ON thread (waiting_minutes, last_write_at)
    WHERE waiting_minutes IS NOT NULL""",
]
KEYS_DDL = [
    *THREAD_DDL,
    """CREATE TABLE ckpt (thread_id text NOT NULL, ns text NOT NULL, checkpoint_id text NOT NULL,
    parent_checkpoint_id text, type text NOT NULL, checkpoint blob NOT NULL,
    channel_versions text NOT NULL, blob_versions text, inline blob, metadata text NOT NULL,
    source text NOT NULL, step integer, run_id text, durability text NOT NULL,
    created_at datetime NOT NULL, PRIMARY KEY (thread_id, ns, checkpoint_id)) WITHOUT ROWID""",
    """CREATE TABLE blob (thread_id text NOT NULL, ns text NOT NULL, channel text NOT NULL,
    version text NOT NULL, type text NOT NULL, blob blob,
    PRIMARY KEY (thread_id, ns, channel, version)) WITHOUT ROWID""",
    """CREATE TABLE pwrite (thread_id text NOT NULL, ns text NOT NULL,
    checkpoint_id text NOT NULL, task_id text NOT NULL, idx integer NOT NULL,
    task_path text NOT NULL, channel text NOT NULL, type text NOT NULL, blob blob NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, idx)) WITHOUT ROWID""",
    """CREATE INDEX write_status_channel ON pwrite (channel, thread_id)
    WHERE channel IN ('__interrupt__', '__resume__', '__error__')""",
]
RUN_INDEX = "CREATE INDEX checkpoint_run ON ckpt (run_id)"

LG_DDL = [
    """CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))""",
    """CREATE TABLE IF NOT EXISTS writes (thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '', idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT,
    value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))""",
]

# The proposed statements.
P_THREAD_EVERY = """
INSERT INTO thread (thread_id, owner_id, created_at, last_write_at, version)
VALUES (:thread_id, NULL, :now, :now, 1)
ON CONFLICT (thread_id) DO UPDATE SET last_write_at = excluded.last_write_at,
    owner_id = COALESCE(thread.owner_id, excluded.owner_id)
"""
# Written only when a field changes: the first put, a new owner, or a stale last write.
P_THREAD_LAZY = """
INSERT INTO thread (thread_id, owner_id, created_at, last_write_at, version)
VALUES (:thread_id, NULL, :now, :now, 1)
ON CONFLICT (thread_id) DO UPDATE SET last_write_at = excluded.last_write_at,
    owner_id = COALESCE(thread.owner_id, excluded.owner_id)
WHERE thread.last_write_at < :stale
   OR (thread.owner_id IS NULL AND excluded.owner_id IS NOT NULL)
"""
P_TOUCH_EVERY = """
INSERT INTO thread (thread_id, created_at, last_write_at, version)
VALUES (:thread_id, :now, :now, 1)
ON CONFLICT (thread_id) DO UPDATE SET last_write_at = excluded.last_write_at
WHERE last_write_at < excluded.last_write_at
"""
P_TOUCH_LAZY = """
INSERT INTO thread (thread_id, created_at, last_write_at, version)
VALUES (:thread_id, :now, :now, 1)
ON CONFLICT (thread_id) DO UPDATE SET last_write_at = excluded.last_write_at
WHERE last_write_at < :stale
"""
P_BLOB = """
INSERT INTO blob (thread_id, ns, channel, version, type, blob) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
"""
P_CKPT = """
INSERT INTO ckpt (thread_id, ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    channel_versions, blob_versions, inline, metadata, source, step, run_id, durability,
    created_at)
VALUES (:thread_id, :ns, :checkpoint_id, :parent_id, :type, :body, :channel_versions,
    :blob_versions, :inline, :metadata, :source, :step, :run_id, 'disk', :now)
ON CONFLICT (thread_id, ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = excluded.parent_checkpoint_id, type = excluded.type,
    checkpoint = excluded.checkpoint, channel_versions = excluded.channel_versions,
    blob_versions = excluded.blob_versions, inline = excluded.inline,
    metadata = excluded.metadata, source = excluded.source, step = excluded.step,
    run_id = excluded.run_id, durability = excluded.durability, created_at = excluded.created_at
"""
P_WRITE = """
INSERT INTO pwrite (thread_id, ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
P_COLS = """c.thread_id, c.ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
       c.metadata, c.channel_versions, c.blob_versions, c.inline"""
P_GET_LATEST = f"""
WITH c AS MATERIALIZED (
  SELECT {P_COLS} FROM ckpt c WHERE c.thread_id = :thread_id AND c.ns = :ns
  ORDER BY c.checkpoint_id DESC LIMIT 1
)
SELECT 0, * FROM c
UNION ALL
SELECT 1, b.channel, b.type, b.blob, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM c, json_each(c.blob_versions) AS v
CROSS JOIN blob b ON b.thread_id = c.thread_id AND b.ns = c.ns
 AND b.channel = v.key AND b.version = CAST(v.value AS TEXT)
WHERE b.type <> 'empty'
UNION ALL
SELECT 2, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob, NULL, NULL, NULL, NULL
FROM c CROSS JOIN pwrite w ON w.thread_id = c.thread_id AND w.ns = c.ns
 AND w.checkpoint_id = c.checkpoint_id
"""
P_PAGE = f"""
SELECT {P_COLS} FROM ckpt c WHERE c.thread_id = :thread_id AND c.ns = :ns
ORDER BY c.checkpoint_id DESC LIMIT :limit
"""
P_BLOBS = """
SELECT b.channel, b.type, b.blob FROM json_each(:versions) AS v
CROSS JOIN blob b ON b.thread_id = :thread_id AND b.ns = :ns
 AND b.channel = v.key AND b.version = CAST(v.value AS TEXT)
WHERE b.type <> 'empty'
"""
P_WRITES = """
SELECT task_id, task_path, idx, channel, type, blob FROM pwrite
WHERE thread_id = :thread_id AND ns = :ns AND checkpoint_id = :checkpoint_id
"""
LG_PUT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
LG_WRITES = (
    "INSERT OR IGNORE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
LG_COLS = "thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
LG_LATEST = (
    f"SELECT {LG_COLS} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
LG_LIST = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT ?"
)
LG_PENDING = pending_writes_sql(True)
OUR_PAGE = S.list_page(
    thread=True, ns=True, checkpoint_id=False, before=False, source=False, step=False, cursor=False
)


class Variant:
    name = ""

    def __init__(self, path: str, sync: str, stale: float) -> None:
        self.path = path
        self.stale = stale
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        self.conn = self.connect()
        self.conn.execute(f"PRAGMA synchronous = {sync}")
        self.create()

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    def create(self) -> None:
        for sql in self.ddl():
            self.conn.execute(sql)

    def ddl(self) -> list[str]:
        return []

    def checkpoints(self) -> int:
        return 0


class Ours(Variant):
    """The current schema and statements (SqliteStore._put_row and friends)."""

    name = "ours"

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # checkpoints.apps on a new file
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")  # Django's sqlite backend
        return conn

    def ddl(self) -> list[str]:
        return DDL_CURRENT

    upsert_checkpoint = S.UPSERT_CHECKPOINT

    def split(self, s: Step) -> tuple[list[tuple], dict]:
        """The blob rows to insert, and any more parameters of the checkpoint's upsert."""
        return s.blobs, {}

    def put(self, t: str, s: Step) -> None:
        conn = self.conn
        rows, more = self.split(s)
        params = {
            "thread_id": t,
            "owner_id": None,
            "ns": "",
            "checkpoint_id": s.cid,
            "parent_id": s.parent,
            "type": s.body_type,
            "body": s.body,
            "channel_versions": s.versions,
            "source": s.source,
            "step": s.step,
            "run_id": s.run_id,
            "durability": "disk",
            "now": now_text(),
            "metadata": s.metadata,
            **more,
        }
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.cursor()
        pk = cur.execute(S.UPSERT_THREAD, params).fetchone()[0]
        if rows:  # as SqliteStore._put_row
            cur.executemany(S.INSERT_BLOB, [(pk, "", c, v, ty, b) for c, v, ty, b in rows])
        cur.execute(self.upsert_checkpoint, dict(params, thread_pk=pk))
        cur.close()
        conn.commit()

    def put_writes(self, t: str, s: Step) -> None:
        conn = self.conn
        args = [("", s.cid, s.task, "", i, c, ty, b, t) for i, c, ty, b in s.writes]
        cur = conn.cursor()
        conn.execute("BEGIN IMMEDIATE")
        cur.execute(S.TOUCH_THREAD, {"thread_id": t, "now": now_text()})
        cur.executemany(S.PUT_WRITE_KEEP, args)
        conn.commit()
        cur.close()

    def get(self, t: str):
        cur = self.conn.cursor()
        rows = cur.execute(
            S.GET_LATEST_ONE, {"thread_id": t, "ns": "", "checkpoint_id": None}
        ).fetchall()
        cur.close()
        return rows

    def list50(self, t: str):
        cur = self.conn.cursor()
        rows = cur.execute(OUR_PAGE, {"thread_id": t, "ns": "", "limit": 50}).fetchall()
        out = S.with_blobs_and_writes(cur, rows)
        cur.close()
        return out

    def checkpoints(self) -> int:
        return self.conn.execute("SELECT count(*) FROM checkpoints_checkpoint").fetchone()[0]


def _without(ddl: list[str], *, indexes=(), autoincrement=True, checks=True) -> list[str]:
    out = []
    for sql in ddl:
        if any(f'INDEX "{name}"' in sql for name in indexes):
            continue
        if not autoincrement:
            sql = sql.replace(" AUTOINCREMENT", "")
        if not checks:
            for column in ("channel_versions", "metadata"):
                sql = sql.replace(f' CHECK ((JSON_VALID("{column}") OR "{column}" IS NULL))', "")
        out.append(sql)
    return out


class OursPart(Ours):
    """``ours`` less one part of its schema (``--variants ours-noai,ours-nocheck,...``):
    what that part costs a put, statements and pages alike."""

    indexes: tuple[str, ...] = ()
    autoincrement = True
    checks = True

    def ddl(self) -> list[str]:
        return _without(
            DDL_CURRENT,
            indexes=self.indexes,
            autoincrement=self.autoincrement,
            checks=self.checks,
        )


def _part(name: str, doc: str, **rules) -> type[OursPart]:
    return type(
        f"Ours_{name.replace('-', '_')}", (OursPart,), {"name": name, "__doc__": doc, **rules}
    )


OUR_PARTS = (
    _part("ours-noai", "no AUTOINCREMENT (plain rowid aliases)", autoincrement=False),
    _part("ours-nocheck", "no JSON_VALID checks on the JSON columns", checks=False),
    _part("ours-nosrc", "no checkpoint_source_step", indexes=("checkpoint_source_step",)),
    _part("ours-norun", "no checkpoint_run", indexes=("checkpoint_run",)),
    _part("ours-noid", "no checkpoint_id_order", indexes=("checkpoint_id_order",)),
    _part("ours-nothr", "no checkpoint_thread_order", indexes=("checkpoint_thread_order",)),
    _part(
        "ours-bare",
        "none of the above: no AUTOINCREMENT, checks or extra checkpoint index",
        autoincrement=False,
        checks=False,
        indexes=(
            "checkpoint_source_step",
            "checkpoint_run",
            "checkpoint_id_order",
            "checkpoint_thread_order",
        ),
    ),
)


# ``ours-inline``: the current schema plus two columns, small values kept in the checkpoint
# row as JSON ({channel: [version, type, base64]}) and carried from the parent's row by
# the statement itself, so a put does no Python per unchanged channel; ``blob_versions``
# names the channels kept as blob rows (NULL: every one, as rows written before).
INLINE_COLUMNS = [
    "ALTER TABLE checkpoints_checkpoint ADD COLUMN blob_versions text",
    "ALTER TABLE checkpoints_checkpoint ADD COLUMN inline text",
]
_FROM_PARENT = """FROM checkpoints_checkpoint p, json_each({column}) e,
  json_each(:channel_versions) v
  WHERE p.thread_id = :thread_pk AND p.checkpoint_ns = :ns AND p.checkpoint_id = :parent_id
    AND v.key = e.key AND v.value = {version}"""
I_UPSERT_CHECKPOINT = (
    S.UPSERT_CHECKPOINT.replace(
        "channel_versions, metadata,", "channel_versions, blob_versions, inline, metadata,", 1
    )
    .replace(
        ":channel_versions,\n",
        ":channel_versions,\n"
        "  json_patch(COALESCE((SELECT json_group_object(e.key, e.value) "
        + _FROM_PARENT.format(
            column="COALESCE(p.blob_versions, p.channel_versions)", version="e.value"
        )
        + "), '{}'), :new_blobs),\n"
        "  json_patch(COALESCE((SELECT json_group_object(e.key, json(e.value)) "
        + _FROM_PARENT.format(column="p.inline", version="json_extract(e.value, '$[0]')")
        + "), '{}'), :new_inline),\n",
        1,
    )
    .replace(
        "channel_versions = excluded.channel_versions,",
        "channel_versions = excluded.channel_versions, blob_versions = excluded.blob_versions, "
        "inline = excluded.inline,",
        1,
    )
)
I_GET_LATEST_ONE = (
    S.GET_LATEST_ONE.replace(
        "c.channel_versions\n", "c.channel_versions, c.blob_versions, c.inline\n", 1
    )
    .replace(
        "json_each(c.channel_versions)",
        "json_each(COALESCE(c.blob_versions, c.channel_versions))",
    )
    # Two more columns: two more NULLs padding the blob and write rows.
    .replace("b.blob, NULL,", "b.blob, NULL, NULL, NULL,", 1)
    .replace("w.blob, NULL,", "w.blob, NULL, NULL, NULL,", 1)
)
I_PAGE = OUR_PAGE.replace(
    "c.channel_versions\n", "c.channel_versions, c.blob_versions, c.inline\n", 1
)


def _inline_values(text: str | None) -> dict[str, tuple[str, bytes]]:
    """The inline column's values as a reader would take them (base64 decoded)."""
    if not text:
        return {}
    return {c: (t, a2b_base64(d)) for c, (_, t, d) in json.loads(text).items()}


class OursInline(Ours):
    """``ours`` with small values in the row, carried forward by SQL (see INLINE_COLUMNS);
    a new value is inline when not compressed (<= 64 KB)."""

    name = "ours-inline"

    def ddl(self) -> list[str]:
        return DDL_CURRENT + INLINE_COLUMNS

    upsert_checkpoint = I_UPSERT_CHECKPOINT

    def split(self, s: Step) -> tuple[list[tuple], dict]:
        new_inline, new_blobs, rows = {}, {}, []
        for channel, version, type_, data in s.blobs:
            if data is not None and not type_.endswith("+zstd"):
                new_inline[channel] = [version, type_, b2a_base64(data, newline=False).decode()]
            else:
                new_blobs[channel] = version
                rows.append((channel, version, type_, data))
        return rows, {
            "new_blobs": json.dumps(new_blobs) if new_blobs else "{}",
            "new_inline": json.dumps(new_inline) if new_inline else "{}",
        }

    def get(self, t: str):
        cur = self.conn.cursor()
        rows = cur.execute(
            I_GET_LATEST_ONE, {"thread_id": t, "ns": "", "checkpoint_id": None}
        ).fetchall()
        cur.close()
        return rows, _inline_values(rows[0][-1])

    def list50(self, t: str):
        cur = self.conn.cursor()
        out = []
        for row in cur.execute(I_PAGE, {"thread_id": t, "ns": "", "limit": 50}).fetchall():
            versions = row[10] if row[10] is not None else row[9]
            blobs = (
                cur.execute(
                    S.BLOBS, {"versions": versions, "thread_pk": row[1], "ns": ""}
                ).fetchall()
                if versions != "{}"
                else []
            )
            writes = cur.execute(
                S.WRITES, {"thread_pk": row[1], "ns": "", "checkpoint_id": row[4]}
            ).fetchall()
            out.append((*row, blobs, writes, _inline_values(row[11])))
        cur.close()
        return out


class Keys(Variant):
    """Natural keys, WITHOUT ROWID; the thread row upserted on every write (as now)."""

    name = "keys"
    lazy = False
    inline = 0  # the inline threshold (INLINE_LIMITS), 0 for none
    run_index = True

    def ddl(self) -> list[str]:
        return KEYS_DDL + ([RUN_INDEX] if self.run_index else [])

    def _thread(self, cur, t: str, now: str, touch: bool) -> None:
        if self.lazy:
            stale = datetime.fromtimestamp(time.time() - self.stale, UTC)
            sql = P_TOUCH_LAZY if touch else P_THREAD_LAZY
            cur.execute(
                sql,
                {"thread_id": t, "now": now, "stale": stale.strftime("%Y-%m-%d %H:%M:%S.%f")},
            )
        else:
            cur.execute(P_TOUCH_EVERY if touch else P_THREAD_EVERY, {"thread_id": t, "now": now})

    def put(self, t: str, s: Step) -> None:
        conn = self.conn
        now = now_text()
        if self.inline:
            blob_versions, blobs, inline = s.split[self.inline]
        else:
            blob_versions, blobs, inline = s.versions, s.blobs, None
        params = {
            "thread_id": t,
            "ns": "",
            "checkpoint_id": s.cid,
            "parent_id": s.parent,
            "type": s.body_type,
            "body": s.body,
            "channel_versions": s.versions,
            "blob_versions": blob_versions,
            "inline": inline,
            "metadata": s.metadata,
            "source": s.source,
            "step": s.step,
            "run_id": s.run_id,
            "now": now,
        }
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.cursor()
        self._thread(cur, t, now, touch=False)
        if blobs:
            cur.executemany(P_BLOB, [(t, "", c, v, ty, b) for c, v, ty, b in blobs])
        cur.execute(P_CKPT, params)
        cur.close()
        conn.commit()

    def put_writes(self, t: str, s: Step) -> None:
        conn = self.conn
        args = [(t, "", s.cid, s.task, "", i, c, ty, b) for i, c, ty, b in s.writes]
        cur = conn.cursor()
        conn.execute("BEGIN IMMEDIATE")
        self._thread(cur, t, now_text(), touch=True)
        cur.executemany(P_WRITE, args)
        conn.commit()
        cur.close()

    def get(self, t: str):
        cur = self.conn.cursor()
        rows = cur.execute(P_GET_LATEST, {"thread_id": t, "ns": ""}).fetchall()
        cur.close()
        return rows

    def list50(self, t: str):
        cur = self.conn.cursor()
        out = []
        for row in cur.execute(P_PAGE, {"thread_id": t, "ns": "", "limit": 50}).fetchall():
            blobs = cur.execute(P_BLOBS, {"versions": row[8], "thread_id": t, "ns": ""}).fetchall()
            writes = cur.execute(
                P_WRITES, {"thread_id": t, "ns": "", "checkpoint_id": row[2]}
            ).fetchall()
            out.append((*row, blobs, writes))
        cur.close()
        return out

    def checkpoints(self) -> int:
        return self.conn.execute("SELECT count(*) FROM ckpt").fetchone()[0]


class Lazy(Keys):
    name = "lazy"
    lazy = True


class Inline(Lazy):
    name = "inline"
    inline = 1024


class Min(Inline):
    name = "min"
    run_index = False


class Rowid(Keys):
    """``keys`` as rowid tables: the natural key is the PRIMARY KEY's index (as SqliteSaver's),
    the row lives in the table's b-tree, whose leaves hold ~4 KB of a row before overflow
    (an index b-tree, which a WITHOUT ROWID table is, holds ~1 KB)."""

    name = "rowid"

    def ddl(self) -> list[str]:
        return [sql.replace(") WITHOUT ROWID", ")") for sql in super().ddl()]


class RowidMin(Rowid):
    """``rowid`` with ``lazy``, ``inline`` and no index but the keys (``min``'s rules)."""

    name = "rowid-min"
    lazy = True
    inline = 1024
    run_index = False


class RowidWide(RowidMin):
    """``rowid-min`` with every uncompressed value (up to 64 KB) inline: only compressed
    values (the documents) stay blob rows, shared between checkpoints."""

    name = "rowid-64k"
    inline = COMPRESS_BYTES


class Lg(Variant):
    """SqliteSaver: its tables, its statements, its connection's implicit transactions."""

    name = "lg"

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False)  # isolation_level ""
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    def ddl(self) -> list[str]:
        return LG_DDL

    def put(self, t: str, s: Step) -> None:
        cur = self.conn.cursor()
        cur.execute(LG_PUT, (t, "", s.cid, s.parent, s.lg_type, s.lg_body, s.metadata.encode()))
        self.conn.commit()
        cur.close()

    def put_writes(self, t: str, s: Step) -> None:
        cur = self.conn.cursor()
        cur.executemany(
            LG_WRITES, [(t, "", s.cid, s.task, "", i, c, ty, b) for i, c, ty, b in s.writes]
        )
        self.conn.commit()
        cur.close()

    def get(self, t: str):
        cur = self.conn.cursor()
        row = cur.execute(LG_LATEST, (t, "")).fetchone()
        writes = cur.execute(LG_PENDING, (t, "", row[1])).fetchall()
        cur.close()
        return row, writes

    def list50(self, t: str):
        cur = self.conn.cursor()
        wcur = self.conn.cursor()
        out = []
        for row in cur.execute(LG_LIST, (t, "", 50)):
            out.append((row, wcur.execute(LG_PENDING, (t, "", row[2])).fetchall()))
        cur.close()
        wcur.close()
        return out

    def checkpoints(self) -> int:
        return self.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


VARIANTS = {
    v.name: v
    for v in (Ours, *OUR_PARTS, OursInline, Keys, Lazy, Inline, Min, Rowid, RowidMin, RowidWide, Lg)
}
DDL_CURRENT: list[str] = []


# -- measuring ----------------------------------------------------------------------------
@dataclass
class Calls:
    cpu: dict[str, list[int]] = field(default_factory=dict)
    wall: dict[str, list[int]] = field(default_factory=dict)

    def time(self, key: str, fn, *args):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        out = fn(*args)
        w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        self.cpu.setdefault(key, []).append(c1 - c0)
        self.wall.setdefault(key, []).append(w1 - w0)
        return out


def wal_frames(variant: Variant, data: list[list[Step]], page: int) -> tuple[float, float]:
    """Frames per put and per put_writes commit, from the WAL's growth (no checkpoints)."""
    variant.conn.execute("PRAGMA wal_autocheckpoint = 0")
    wal = variant.path + "-wal"

    def size() -> int:
        return os.path.getsize(wal) if os.path.exists(wal) else 0

    puts, writes = [], []
    for i, steps in enumerate(data):
        for s in steps:
            before = size()
            variant.put(tid(i, "f"), s)
            mid = size()
            variant.put_writes(tid(i, "f"), s)
            puts.append((mid - before) / (page + 24))
            writes.append((size() - mid) / (page + 24))
    skip = len(puts) // 10  # the first steps create the first pages
    return statistics.mean(puts[skip:]), statistics.mean(writes[skip:])


def run(args) -> None:
    os.makedirs(WORK, exist_ok=True)
    DDL_CURRENT[:] = current_ddl()
    names = args.variants.split(",")
    docs = DocumentPool()
    shape = CHAT
    if args.shape == "small":
        # The e2e graph's regime: a short message list, no large value (the "document" is a
        # 200-byte string), so SqliteSaver's whole-checkpoint row is a few KB.
        docs.docs = [d[:200] for d in docs.docs]
        shape = replace(CHAT, name="small", window=10)
    t0 = time.perf_counter()
    data = [
        make_thread(f"thread-{i:03d}-0123456789abcdef", args.steps, docs, shape)
        for i in range(args.threads)
    ]
    print(
        f"# workload {args.shape}: {args.threads} threads x {args.steps} steps, made in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )

    # WAL frames a commit, once (synchronous does not change what is written).
    frames = {}
    for name in names:
        v = VARIANTS[name](os.path.join(WORK, f"frames-{name}.sqlite3"), "FULL", args.stale)
        page = v.conn.execute("PRAGMA page_size").fetchone()[0]
        frames[name] = (*wal_frames(v, data[: args.frame_threads], page), page)
        v.conn.close()

    results = {}
    for sync in args.sync.split(","):
        subjects = [
            VARIANTS[n](os.path.join(WORK, f"{n}-{sync}.sqlite3"), sync, args.stale) for n in names
        ]
        calls = Calls()
        rng = random.Random(1)
        # Writes: step by step, thread by thread, the variants in a new order each call.
        for k in range(args.steps):
            for i, steps in enumerate(data):
                order = subjects[:]
                rng.shuffle(order)
                for v in order:
                    calls.time(f"{v.name}/put", v.put, tid(i), steps[k])
                    calls.time(f"{v.name}/put_writes", v.put_writes, tid(i), steps[k])
        # Reads: interleaved rounds over every thread.
        for _ in range(args.rounds):
            for i in range(len(data)):
                order = subjects[:]
                rng.shuffle(order)
                for v in order:
                    calls.time(f"{v.name}/get", v.get, tid(i))
                    calls.time(f"{v.name}/list50", v.list50, tid(i))
        sizes = {}
        for v in subjects:
            v.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes[v.name] = os.path.getsize(v.path) / v.checkpoints()
            v.conn.close()
        results[sync] = (calls, sizes)
    report(names, frames, results)


def report(names, frames, results) -> None:
    med = statistics.median
    print("\n## WAL per commit (wal_autocheckpoint=0)\n")
    print("| variant | frames/put | KB/put | frames/put_writes | KB/put_writes |")
    print("|---|---|---|---|---|")
    for n in names:
        fp, fw, page = frames[n]
        print(
            f"| {n} | {fp:.1f} | {fp * (page + 24) / 1024:.1f} | {fw:.1f} | "
            f"{fw * (page + 24) / 1024:.1f} |"
        )
    for sync, (calls, sizes) in results.items():
        print(
            f"\n## synchronous={sync}: us per call, median (thread CPU / wall); "
            "'x lg' = lg's CPU / this CPU (>= 1: as fast as SqliteSaver or faster)\n"
        )
        print(
            "| variant | put CPU | put wall | put mean wall | x lg | put_writes CPU | wall | x lg "
            "| get CPU | x lg | list50 CPU | x lg | file bytes/ckpt | x lg |"
        )
        print("|" + "---|" * 14)
        lg = {op: med(calls.cpu[f"lg/{op}"]) for op in ("put", "put_writes", "get", "list50")}
        for n in names:
            c = {op: med(calls.cpu[f"{n}/{op}"]) for op in lg}
            w = {op: med(calls.wall[f"{n}/{op}"]) for op in lg}
            mean_put = statistics.mean(calls.wall[f"{n}/put"])
            print(
                f"| {n} | {c['put'] / 1e3:.0f} | {w['put'] / 1e3:.0f} | {mean_put / 1e3:.0f} | "
                f"{lg['put'] / c['put']:.2f} | {c['put_writes'] / 1e3:.0f} | "
                f"{w['put_writes'] / 1e3:.0f} | {lg['put_writes'] / c['put_writes']:.2f} | "
                f"{c['get'] / 1e3:.0f} | {lg['get'] / c['get']:.2f} | "
                f"{c['list50'] / 1e3:.0f} | {lg['list50'] / c['list50']:.2f} | "
                f"{sizes[n]:,.0f} | {sizes[n] / sizes['lg']:.2f} |"
            )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=8, help="read rounds over every thread")
    p.add_argument("--frame-threads", type=int, default=2)
    p.add_argument("--sync", default="FULL,NORMAL")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--shape", choices=("chat", "small"), default="chat")
    p.add_argument("--stale", type=float, default=60.0, help="lazy: seconds a last write may lag")
    args = p.parse_args(argv)
    if "lg" not in args.variants.split(","):
        p.error("the variants must include lg (the ratios are against it)")
    run(args)
    if os.environ.get("BENCH_SQLITE_SCHEMA_KEEP") != "1":
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
