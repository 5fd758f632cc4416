"""What the benchmark runs: our savers, LangGraph's, and raw one-statement floors."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from checkpoints.store.contract import strict_serializer


@dataclass
class Subject:
    """One store under test, with how to measure what it holds."""

    label: str
    family: str
    saver: Any
    stored_bytes: Callable[[], int]
    checkpoint_count: Callable[[], int]
    close: Callable[[], None] = field(default=lambda: None)
    # A floor that only runs graph turns (`bench.floor.FloorSaver`): no per-operation timings,
    # no sizes, no growth curve.
    e2e_only: bool = False

    @property
    def runs_graphs(self) -> bool:
        return isinstance(self.saver, BaseCheckpointSaver)


# -- raw floors: one statement per operation, same serializer, no reconstruction ---------------
def _changed_bytes(serde, checkpoint: dict, new_versions: dict) -> tuple[str, bytes]:
    """The checkpoint body plus only the channel values this put changed: what a put adds."""
    values = checkpoint.get("channel_values") or {}
    body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    body["channel_values"] = {ch: values[ch] for ch in new_versions if ch in values}
    return serde.dumps_typed(body)


def _config(thread_id: str, checkpoint_id: str) -> dict:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


class RawSqlFloor:
    """Insert and select the same bytes with one hand-written statement each."""

    def __init__(self, conn, *, sqlite: bool) -> None:
        self.conn = conn
        self.sqlite = sqlite
        self.serde = strict_serializer()
        blob = "BLOB" if sqlite else "BYTEA"
        for stmt in (
            f"""CREATE TABLE IF NOT EXISTS raw_checkpoints (
                thread_id TEXT NOT NULL, checkpoint_id TEXT NOT NULL, parent_id TEXT,
                type TEXT NOT NULL, data {blob} NOT NULL, metadata TEXT NOT NULL,
                PRIMARY KEY (thread_id, checkpoint_id))""",
            f"""CREATE TABLE IF NOT EXISTS raw_writes (
                thread_id TEXT NOT NULL, checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL,
                idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT NOT NULL,
                data {blob} NOT NULL, PRIMARY KEY (thread_id, checkpoint_id, task_id, idx))""",
        ):
            self._run([(stmt, ())])

    def _sql(self, sql: str) -> str:
        return sql.replace("%s", "?") if self.sqlite else sql

    def _run(self, statements) -> None:
        if self.sqlite:
            with self.conn:
                for sql, params in statements:
                    self.conn.execute(self._sql(sql), params)
        else:
            with self.conn.transaction():
                for sql, params in statements:
                    self.conn.execute(sql, params)

    def _select(self, sql: str, params) -> list[tuple]:
        return list(self.conn.execute(self._sql(sql), params).fetchall())

    def get_next_version(self, current, channel=None) -> int:
        return (current or 0) + 1

    def put(self, config, checkpoint, metadata, new_versions) -> dict:
        conf = config["configurable"]
        type_, data = _changed_bytes(self.serde, checkpoint, new_versions)
        self._run(
            [
                (
                    "INSERT INTO raw_checkpoints VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (
                        conf["thread_id"],
                        checkpoint["id"],
                        conf.get("checkpoint_id"),
                        type_,
                        data,
                        json.dumps(metadata),
                    ),
                )
            ]
        )
        return _config(conf["thread_id"], checkpoint["id"])

    def put_writes(self, config, writes, task_id, task_path="") -> None:
        conf = config["configurable"]
        rows = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            rows.append(
                (conf["thread_id"], conf["checkpoint_id"], task_id, idx, channel, type_, data)
            )
        marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
        flat = tuple(v for row in rows for v in row)
        self._run([(f"INSERT INTO raw_writes VALUES {marks} ON CONFLICT DO NOTHING", flat)])

    def _decode(self, row) -> tuple:
        return row[0], self.serde.loads_typed((row[1], bytes(row[2]))), json.loads(row[3])

    def get_tuple(self, config):
        conf = config["configurable"]
        cols = (
            "SELECT checkpoint_id, type, data, metadata FROM raw_checkpoints WHERE thread_id = %s"
        )
        if conf.get("checkpoint_id"):
            rows = self._select(
                cols + " AND checkpoint_id = %s", (conf["thread_id"], conf["checkpoint_id"])
            )
        else:
            rows = self._select(cols + " ORDER BY checkpoint_id DESC LIMIT 1", (conf["thread_id"],))
        return self._decode(rows[0]) if rows else None

    def list(self, config, *, limit=None, **_):
        rows = self._select(
            "SELECT checkpoint_id, type, data, metadata FROM raw_checkpoints "
            "WHERE thread_id = %s ORDER BY checkpoint_id DESC LIMIT %s",
            (config["configurable"]["thread_id"], limit or 1_000_000),
        )
        return [self._decode(r) for r in rows]

    def delete_thread(self, thread_id: str) -> None:
        self._run(
            [
                ("DELETE FROM raw_writes WHERE thread_id = %s", (thread_id,)),
                ("DELETE FROM raw_checkpoints WHERE thread_id = %s", (thread_id,)),
            ]
        )


class RawRedisFloor:
    """The same bytes as plain Redis keys: a sorted-set index plus one key per checkpoint."""

    PREFIX = "rawbench:"

    def __init__(self, client) -> None:
        self.r = client
        self.serde = strict_serializer()

    def _keys(self, thread_id: str) -> tuple[str, str]:
        base = f"{self.PREFIX}{{{thread_id}}}"
        return base + ":idx", base + ":wkeys"

    def get_next_version(self, current, channel=None) -> int:
        return (current or 0) + 1

    def put(self, config, checkpoint, metadata, new_versions) -> dict:
        conf = config["configurable"]
        tid = conf["thread_id"]
        type_, data = _changed_bytes(self.serde, checkpoint, new_versions)
        idx, _ = self._keys(tid)
        value = type_.encode() + b"\n" + json.dumps(metadata).encode() + b"\n" + data
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"{self.PREFIX}{{{tid}}}:ck:{checkpoint['id']}", value)
        pipe.zadd(idx, {checkpoint["id"]: 0})
        pipe.execute()
        return _config(tid, checkpoint["id"])

    def put_writes(self, config, writes, task_id, task_path="") -> None:
        conf = config["configurable"]
        tid = conf["thread_id"]
        key = f"{self.PREFIX}{{{tid}}}:w:{conf['checkpoint_id']}"
        mapping = {}
        for i, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            mapping[f"{task_id}:{i}:{channel}"] = type_.encode() + b"\n" + data
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(key, mapping=mapping)
        pipe.sadd(self._keys(tid)[1], key)
        pipe.execute()

    def _decode(self, value: bytes):
        type_, meta, data = value.split(b"\n", 2)
        return self.serde.loads_typed((type_.decode(), data)), json.loads(meta)

    def get_tuple(self, config):
        conf = config["configurable"]
        tid = conf["thread_id"]
        cid = conf.get("checkpoint_id")
        if not cid:
            found = self.r.zrevrange(self._keys(tid)[0], 0, 0)
            if not found:
                return None
            cid = found[0].decode()
        value = self.r.get(f"{self.PREFIX}{{{tid}}}:ck:{cid}")
        return self._decode(value) if value else None

    def list(self, config, *, limit=None, **_):
        tid = config["configurable"]["thread_id"]
        ids = self.r.zrevrange(self._keys(tid)[0], 0, (limit or 0) - 1)
        if not ids:
            return []
        values = self.r.mget([f"{self.PREFIX}{{{tid}}}:ck:{i.decode()}" for i in ids])
        return [self._decode(v) for v in values if v]

    def delete_thread(self, thread_id: str) -> None:
        idx, wkeys = self._keys(thread_id)
        ids = self.r.zrange(idx, 0, -1)
        writes = self.r.smembers(wkeys)
        doomed = [f"{self.PREFIX}{{{thread_id}}}:ck:{i.decode()}" for i in ids]
        doomed += [w.decode() for w in writes] + [idx, wkeys]
        for start in range(0, len(doomed), 500):
            self.r.delete(*doomed[start : start + 500])

    def stored_bytes(self) -> int:
        return sum(
            self.r.memory_usage(k) or 0
            for k in self.r.scan_iter(match=self.PREFIX + "*", count=1000)
        )

    def checkpoint_count(self) -> int:
        return sum(1 for _ in self.r.scan_iter(match=self.PREFIX + "*:ck:*", count=1000))


# -- sizes --------------------------------------------------------------------------------------
def pg_relation_bytes(conn, tables: list[str]) -> int:
    """Heap, TOAST and index bytes of ``tables`` after compacting dead rows away."""
    for table in tables:
        conn.execute(f'VACUUM FULL "{table}"')
    row = conn.execute(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
        (tables,),
    ).fetchone()
    return int(row[0])


def sqlite_table_bytes(path: str, tables: list[str]) -> int:
    """Pages used by ``tables`` and their indexes, after VACUUM, from the dbstat view."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("VACUUM")
        marks = ", ".join("?" * len(tables))
        row = conn.execute(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN "
            f"(SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))",
            tables,
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


def sqlite_count(path: str, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])
    finally:
        conn.close()


def payload_bytes(value: Any) -> int:
    """Bytes and text held in nested containers: what an in-memory store keeps."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        return sum(payload_bytes(k) + payload_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return sum(payload_bytes(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return sum(payload_bytes(getattr(value, f)) for f in value.__dataclass_fields__)
    return 8 if value is not None else 0


def file_size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0
