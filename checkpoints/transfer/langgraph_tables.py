"""LangGraph's PostgresSaver and SqliteSaver read straight from their tables.

Their savers decode what a row holds with LangGraph's default serializer, which imports
and calls whatever a msgpack ext payload names (``os.system`` included): reading an
untrusted database through them runs its code. So nothing here goes through the peer's
saver or its serializer. The tables are read with SQL, and every value is decoded by the
store's reader (`checkpoints.codec.serde.store_serializer`), the one that reads our own
stores and export files: it never imports a module and never calls what the bytes name,
so a crafted row comes out exactly as it would from an export file (its data, or a
refusal naming the thread and checkpoint under ``BLOCKED_TYPES = "raise"``).

The layouts are LangGraph's, versioned by their migrations:

- PostgresSaver (``langgraph.checkpoint.postgres.base.MIGRATIONS``): ``checkpoints`` keeps
  the body as JSONB with only primitive channel values inline, ``checkpoint_blobs`` the
  other values keyed by (namespace, channel, version), ``checkpoint_writes`` the pending
  writes (``task_path`` from migration 9), ``checkpoint_migrations`` the version;
- SqliteSaver: ``checkpoints`` keeps the whole body as one typed blob and the metadata as
  JSON, ``writes`` the pending writes (``task_path`` added by a later ALTER).

A checkpoint before format v4 holds its parent's pending sends as the parent's TASKS
writes; they are moved into its TASKS channel as PostgresSaver does when it reads
(`checkpoints.store.planning.parent_sends.migrate_parent_sends`).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import Any
from urllib.parse import quote

import ormsgpack
from langgraph.checkpoint.base import writes_sort_key
from langgraph.constants import TASKS

from checkpoints.codec.budget import ObjectBudget
from checkpoints.codec.serde import Verbatim, store_serializer
from checkpoints.errors import CheckpointConfigError
from checkpoints.store.planning.parent_sends import migrate_parent_sends, needs_parent_sends
from checkpoints.transfer.records import (
    CheckpointRecord,
    ThreadRecord,
    TransferFormatError,
    WriteRecord,
    refuse,
)

PAGE = 1000
# Threads read together: one snapshot and a query per table for all of them.
READ_BATCH = 50
# checkpoint_writes.task_path arrived with PostgresSaver's migration 9; the tables are
# complete from migration 3 (checkpoints, checkpoint_blobs, checkpoint_writes).
PG_TASK_PATH_MIGRATION = 9
PG_TABLES_MIGRATION = 3

Query = Callable[[str, tuple], list[tuple]]


class _Unreadable(Exception):
    """Internal: one part of a thread cannot be read; the thread is refused, named."""

    def __init__(self, why: str, checkpoint: tuple[str, str] | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.checkpoint = checkpoint


class TableSource:
    """Threads read from LangGraph's saver tables, each value by the store's reader."""

    def __init__(self, tables: _Tables, name: str, serde=None, *, own_connection=False) -> None:
        self.tables = tables
        self.name = name
        self.serde = serde or store_serializer()
        # Read from another thread than the one that opened it (an import's read-ahead):
        # only a connection opened here for the source, never a caller's saver's (a
        # SqliteSaver's connection refuses any thread but its own).
        self.reads_ahead = own_connection
        # `threads` hands each msgpack value it checked as its stored bytes (`Verbatim`),
        # not decoded: set by an import whose target stores them as they are.
        self.verbatim = False

    def thread_ids(self) -> Iterator[Any]:
        # Pages in the primary key's order: memory stays flat however many threads.
        last: Any = ""
        while True:
            rows = self.tables.query(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s "
                f"ORDER BY thread_id LIMIT {PAGE}",
                (last,),
            )
            if not rows:
                return
            for (thread_id,) in rows:
                yield thread_id
            last = rows[-1][0]

    def count_threads(self) -> int:
        """How many threads the tables hold (one index scan; for progress)."""
        return int(self.tables.query("SELECT count(DISTINCT thread_id) FROM checkpoints", ())[0][0])

    def threads(self, thread_ids=None) -> Iterator[ThreadRecord | TransferFormatError]:
        """Each thread named (every thread), read ``READ_BATCH`` threads a query."""
        ids = iter(thread_ids if thread_ids is not None else self.thread_ids())
        while chunk := list(islice(ids, READ_BATCH)):
            texts = [t for t in chunk if isinstance(t, str)]
            try:
                parts = self.tables.threads_rows(texts) if texts else {}
            except RecursionError:
                # One thread's JSON nests deeper than can be parsed: each read alone, so
                # that thread alone is refused (`thread_or_refusal`).
                parts = None
            for thread_id in chunk:
                if not isinstance(thread_id, str):
                    yield refuse(
                        f"a thread id that is not text ({type(thread_id).__name__} "
                        f"{_short(thread_id)}) in {self.name}"
                    )
                    continue
                record = self.thread_or_refusal(
                    thread_id,
                    parts.get(thread_id) if parts is not None else False,
                    verbatim=self.verbatim,
                )
                if record is not None:
                    yield record

    def thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread (None when the tables hold none of it); TransferFormatError when a
        part of it cannot be read."""
        found = self.thread_or_refusal(thread_id)
        if isinstance(found, TransferFormatError):
            raise found
        return found

    def thread_or_refusal(
        self, thread_id: str, parts: tuple | None | bool = False, *, verbatim: bool = False
    ) -> ThreadRecord | TransferFormatError | None:
        """The thread, its refusal, or None; ``parts``: its rows as `threads_rows` read
        them with others' (None: it has none), else they are read here. ``verbatim``:
        checked msgpack values as `Verbatim` (see ``self.verbatim``)."""
        try:
            if parts is False:
                parts = self.tables.threads_rows([thread_id]).get(thread_id)
            if parts is None:
                return None
            return self._read(thread_id, parts, verbatim)
        except _Unreadable as exc:
            return refuse(exc.why, thread_id=thread_id, checkpoint=exc.checkpoint)
        except RecursionError:
            # JSON (a JSONB column as the driver parses it, SqliteSaver's metadata) nested
            # deeper than Python's parser recurses: this thread's, not the import's, failure.
            return refuse(
                f"its stored JSON nests deeper than {sys.getrecursionlimit()} levels, more "
                "than can be read",
                thread_id=thread_id,
            )

    # -- one thread -----------------------------------------------------------------------
    def _read(self, thread_id: str, parts: tuple, verbatim: bool = False) -> ThreadRecord | None:
        rows, blobs, write_rows = parts
        keep = self._keep if verbatim else None
        if not rows:
            return None
        writes: dict[tuple[str, str], list[WriteRecord]] = {}
        # What one checkpoint's values may build (codec.budget): its writes, body and blobs,
        # sized first, so a checkpoint far below the budget has no value walked for it.
        raw: dict[tuple[Any, Any], int] = {}
        for ns, cid, *_, data in write_rows:
            raw[(ns, cid)] = raw.get((ns, cid), 0) + _size(data)
        for row in rows:
            at = (row[0] or "", row[1])
            raw[at] = raw.get(at, 0) + self.tables.raw_size(row, blobs)
        budgets = {at: ObjectBudget(size) for at, size in raw.items()}
        for ns, cid, task_id, task_path, idx, channel, type_, data in write_rows:
            at = (_text(ns, "checkpoint_ns"), _text(cid, "checkpoint_id"))
            where = f"pending write of task {_short(task_id)} to channel {_short(channel)}"
            if not isinstance(idx, int) or isinstance(idx, bool):
                raise _Unreadable(f"the {where} has an idx that is not a whole number", at)
            with budgets.setdefault(at, ObjectBudget()):
                # A legacy child moves its parent's sends into its own channel: decoded.
                read = self._decode if channel == TASKS or keep is None else keep
                value = read(type_, data, f"the {where}", at)
            writes.setdefault(at, []).append(
                WriteRecord(
                    task_id=_text(task_id, "task_id", at),
                    channel=_text(channel, "channel", at),
                    value=value,
                    task_path=_text(task_path or "", "task_path", at),
                    idx=idx,
                )
            )
        for found in writes.values():
            found.sort(key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        decoded: dict[tuple[str, str, str], Any] = {}
        rows = sorted(rows, key=lambda r: (str(r[0] or ""), str(r[1])))
        return ThreadRecord(
            thread_id=thread_id,
            checkpoints=[
                self._checkpoint(row, blobs, decoded, writes, budgets, keep) for row in rows
            ],
        )

    def _checkpoint(
        self, row: tuple, blobs, decoded: dict, writes: dict, budgets: dict, keep
    ) -> CheckpointRecord:
        ns, cid = _text(row[0] or "", "checkpoint_ns"), _text(row[1], "checkpoint_id")
        at = (ns, cid)
        with budgets.get(at) or ObjectBudget():  # an id not text: refused inside
            return self._checkpoint_values(row, at, blobs, decoded, writes, keep)

    def _checkpoint_values(
        self, row: tuple, at: tuple[str, str], blobs, decoded: dict, writes: dict, keep
    ) -> CheckpointRecord:
        ns, cid = at
        decode = partial(self._decode, at=at)
        parent = row[2] or None
        if parent is not None:
            parent = _text(parent, "parent_checkpoint_id", at)
        body, metadata = self.tables.body(row, decode, keep and partial(keep, at=at))
        if type(body) is not dict:
            raise _Unreadable(f"its body is a {type(body).__name__}, not an object", at)
        if body.get("id") != cid:
            raise _Unreadable(
                f"its body names checkpoint {_short(body.get('id'))}, its row {cid!r}", at
            )
        if type(metadata) is not dict:
            raise _Unreadable(f"its metadata is a {type(metadata).__name__}, not an object", at)
        self.tables.add_blobs(body, row, blobs, decoded, partial(keep or self._decode, at=at))
        if needs_parent_sends(body, parent):
            sends = [w.value for w in writes.get((ns, parent), ()) if w.channel == TASKS]
            try:
                migrate_parent_sends(body, sends, _first_version)
            except TypeError as exc:  # versions no max() can order
                raise _Unreadable(f"its channel versions cannot be ordered: {exc}", at) from None
        return CheckpointRecord(ns, body, metadata, parent, writes.get(at, []))

    def _decode(self, type_: Any, data: Any, where: str, at: tuple[str, str] | None) -> Any:
        if not isinstance(type_, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise _Unreadable(
                f"{where} is not a (type, bytes) pair: {type(type_).__name__}, "
                f"{type(data).__name__}",
                at,
            )
        try:
            return self.serde.loads_typed((type_, bytes(data)))
        except Exception as exc:  # noqa: BLE001 - the reader's refusal, whatever its kind
            raise _Unreadable(f"{where} cannot be read: {exc}", at) from None

    def _keep(self, type_: Any, data: Any, where: str, at: tuple[str, str] | None) -> Any:
        """A msgpack value as its stored bytes once the reader passed them (`Verbatim`);
        any other kind decoded (`_decode`)."""
        if type_ != "msgpack" or not isinstance(data, (bytes, bytearray, memoryview)):
            return self._decode(type_, data, where, at)
        typed = (type_, bytes(data))
        try:
            self.serde.check_typed(typed)
        except Exception as exc:  # noqa: BLE001 - the reader's refusal, whatever its kind
            raise _Unreadable(f"{where} cannot be read: {exc}", at) from None
        return Verbatim(typed)


def _size(data: Any) -> int:
    # Anything else is refused when it is read; a str (JSON text) by its characters.
    return len(data) if isinstance(data, (bytes, bytearray, memoryview, str)) else 0


def _text(value: Any, what: str, at: tuple[str, str] | None = None) -> str:
    if not isinstance(value, str):
        raise _Unreadable(f"its {what} is a {type(value).__name__}, not text", at)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _first_version() -> str:
    # LangGraph's savers' get_next_version(None, None): version 1 and a random tie-break.
    return f"{1:032}.{random.random():016}"


# -- the two layouts ----------------------------------------------------------------------
class _Tables:
    query: Query

    def threads_rows(self, thread_ids: list[str]) -> dict[str, tuple[list[tuple], Any, list]]:
        """thread id -> (checkpoint rows, blobs, write rows) of those of ``thread_ids``
        that have checkpoints, in one snapshot and a query per table."""
        raise NotImplementedError

    def body(self, row: tuple, decode, keep=None) -> tuple[Any, Any]:
        """(body, metadata) of a checkpoint row; ``keep``: how a value is read where the
        body holds the channel values (`TableSource._keep`), else they are decoded."""
        raise NotImplementedError

    def add_blobs(self, body, row, blobs, decoded, decode) -> None:
        """Put the values a layout keeps apart from the body into its channel_values."""

    def raw_size(self, row: tuple, blobs) -> int:
        """The stored bytes of a checkpoint's body and values that are decoded as msgpack
        or JSON (a blob shared by checkpoints counts for each: an over-estimate)."""
        raise NotImplementedError


class _PostgresTables(_Tables):
    def __init__(self, query: Query, snapshot: Callable[[], Any]) -> None:
        self.query = query
        self.snapshot = snapshot
        found = query(
            "SELECT to_regclass('checkpoint_migrations') IS NOT NULL, "
            "to_regclass('checkpoints') IS NOT NULL",
            (),
        )[0]
        if not all(found):
            raise CheckpointConfigError(
                "not a PostgresSaver database: it has no checkpoint_migrations and "
                "checkpoints tables (LangGraph's PostgresSaver.setup() creates them)",
                field="source",
            )
        (version,) = query("SELECT max(v) FROM checkpoint_migrations", ())[0]
        if version is None or version < PG_TABLES_MIGRATION:
            raise CheckpointConfigError(
                f"the PostgresSaver database is at migration {version}; its tables are "
                f"complete from migration {PG_TABLES_MIGRATION} (run PostgresSaver.setup())",
                field="source",
            )
        self.task_path = "task_path" if version >= PG_TASK_PATH_MIGRATION else "''"

    def threads_rows(self, thread_ids: list[str]):
        found: dict[str, tuple[list, dict, list]] = {}
        with self.snapshot():
            for thread_id, *row in self.query(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
                "checkpoint, metadata, "
                "CASE WHEN jsonb_typeof(checkpoint -> 'channel_versions') = 'object' "
                "THEN (SELECT jsonb_object_agg(key, value) "
                "FROM jsonb_each_text(checkpoint -> 'channel_versions')) END "
                "FROM checkpoints WHERE thread_id = ANY(%s)",
                (thread_ids,),
            ):
                found.setdefault(thread_id, ([], {}, []))[0].append(tuple(row))
            if found:
                for thread_id, ns, channel, version, type_, blob in self.query(
                    "SELECT thread_id, checkpoint_ns, channel, version, type, blob "
                    "FROM checkpoint_blobs WHERE thread_id = ANY(%s)",
                    (list(found),),
                ):
                    if thread_id in found:
                        found[thread_id][1][(ns, channel, version)] = (type_, blob)
                for thread_id, *write in self.query(
                    f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {self.task_path}, "
                    "idx, channel, type, blob FROM checkpoint_writes WHERE thread_id = ANY(%s)",
                    (list(found),),
                ):
                    if thread_id in found:
                        found[thread_id][2].append(tuple(write))
        return found

    def raw_size(self, row, blobs) -> int:
        versions = row[5]
        if type(versions) is not dict:
            return 0
        ns = row[0] or ""
        found = (blobs.get((ns, channel, version)) for channel, version in versions.items())
        return sum(_size(blob[1]) for blob in found if blob is not None)

    def body(self, row, decode, keep=None):
        body = row[3]
        return (dict(body) if type(body) is dict else body), row[4]

    def add_blobs(self, body, row, blobs, decoded, decode) -> None:
        # PostgresSaver's rule: the inline values, then each version's blob over them
        # (an "empty" blob: the channel had no value at that version).
        versions = row[5] or {}
        values = body.get("channel_values")
        values = dict(values) if type(values) is dict else {}
        ns = row[0] or ""
        for channel, version in versions.items():
            key = (ns, channel, version)
            if key not in blobs:
                continue
            if key not in decoded:
                type_, blob = blobs[key]
                if type_ == "empty":
                    decoded[key] = _EMPTY
                else:
                    decoded[key] = decode(type_, blob, f"the value of channel {channel!r}")
            if decoded[key] is not _EMPTY:
                values[channel] = decoded[key]
        body["channel_values"] = values


_EMPTY = object()


class _SqliteTables(_Tables):
    def __init__(self, query: Query) -> None:
        self.query = query
        tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table'", ())}
        missing = {"checkpoints", "writes"} - tables
        if missing:
            raise CheckpointConfigError(
                "not a SqliteSaver file: it has no "
                + " and no ".join(f"{t!r} table" for t in sorted(missing)),
                field="source",
            )
        columns = {r[1] for r in query("PRAGMA table_info(writes)", ())}
        self.task_path = "task_path" if "task_path" in columns else "''"

    def threads_rows(self, thread_ids: list[str]):
        found: dict[str, tuple[list, None, list]] = {}
        marks = ", ".join("?" * len(thread_ids))
        for thread_id, *row in self.query(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
            f"checkpoint, metadata FROM checkpoints WHERE thread_id IN ({marks})",
            tuple(thread_ids),
        ):
            found.setdefault(thread_id, ([], None, []))[0].append(tuple(row))
        if found:
            marks = ", ".join("?" * len(found))
            for thread_id, *write in self.query(
                f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {self.task_path}, "
                f"idx, channel, type, value FROM writes WHERE thread_id IN ({marks})",
                tuple(found),
            ):
                if thread_id in found:
                    found[thread_id][2].append(tuple(write))
        return found

    def raw_size(self, row, blobs) -> int:
        return _size(row[4]) + _size(row[5])

    def body(self, row, decode, keep=None):
        body = self._body(row, decode, keep) if keep else None
        if body is None:
            body = decode(row[3], row[4], "its body")
        raw = row[5]
        if raw is None:
            return body, {}
        if not isinstance(raw, (bytes, str)):
            return body, raw
        try:
            return body, json.loads(raw)
        except ValueError as exc:
            ns, cid = row[0] or "", row[1]
            raise _Unreadable(f"its metadata is not JSON: {exc}", (ns, cid)) from None

    @staticmethod
    def _body(row, decode, keep) -> Any:
        """The body with each channel value as its own stored bytes (``keep``), the rest
        decoded; None when the bytes are not a map laid out as `channel_entries` reads."""
        if row[3] != "msgpack" or not isinstance(row[4], bytes):
            return None
        if not any(lead in row[4] for lead in _EXT_LEADS):
            # Plain data (no model, no ext payload anywhere): read whole and encoded again
            # in C, cheaper than laying it out in Python; the same values either way.
            return None
        found = channel_entries(row[4])
        if found is None:
            return None
        rest, entries = found
        body = decode("msgpack", rest, "its body")
        if type(body) is not dict or "channel_values" in body:
            return None
        values = {}
        for key, value in entries:
            try:
                name = ormsgpack.unpackb(key)
            except Exception:  # noqa: BLE001 - decoded whole below, and refused there
                return None
            if type(name) is not str or name in values:
                return None  # decoded whole: the checks name what is wrong with it
            values[name] = keep("msgpack", value, f"the value of channel {name!r}")
        body["channel_values"] = values
        return body


# -- msgpack laid out, not read -----------------------------------------------------------
# Bytes after the lead byte before the next item, and items inside, of each lead byte
# (`_FIXED`), and the width of the length that follows the others (`_SIZED`).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
# lead byte -> (length width, bytes after the length besides the payload, items per count)
_SIZED = {
    0xC4: (1, 0, 0),
    0xC5: (2, 0, 0),
    0xC6: (4, 0, 0),  # bin
    0xC7: (1, 1, 0),
    0xC8: (2, 1, 0),
    0xC9: (4, 1, 0),  # ext: the type byte
    0xD9: (1, 0, 0),
    0xDA: (2, 0, 0),
    0xDB: (4, 0, 0),  # str
    0xDC: (2, 0, 1),
    0xDD: (4, 0, 1),
    0xDE: (2, 0, 2),
    0xDF: (4, 0, 2),  # array, map
}


class _Layout(Exception):
    """Internal: the bytes are not msgpack laid out as expected."""


def _skip(data: bytes, pos: int) -> int:
    """Where the msgpack item at ``pos`` ends, walking only its lengths."""
    end, count = len(data), 1
    while count:
        if pos >= end:
            raise _Layout
        lead = data[pos]
        count -= 1
        if lead <= 0x7F or lead >= 0xE0:
            pos += 1
        elif lead <= 0x8F:
            count += 2 * (lead & 0x0F)
            pos += 1
        elif lead <= 0x9F:
            count += lead & 0x0F
            pos += 1
        elif lead <= 0xBF:
            pos += 1 + (lead & 0x1F)
        elif lead in _FIXED:
            pos += 1 + _FIXED[lead]
        elif lead in _SIZED:
            width, extra, items = _SIZED[lead]
            size = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
            if items:
                count += items * size
            else:
                pos += extra + size
        else:
            raise _Layout  # 0xC1, never used
    if pos > end:
        raise _Layout
    return pos


def _map_header(data: bytes, pos: int) -> tuple[int, int]:
    """(entries, where the first key starts) of the map at ``pos``."""
    lead = data[pos] if pos < len(data) else None
    if lead is not None and 0x80 <= lead <= 0x8F:
        return lead & 0x0F, pos + 1
    if lead in (0xDE, 0xDF):
        width = 2 if lead == 0xDE else 4
        return int.from_bytes(data[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
    raise _Layout


_CHANNEL_VALUES = ormsgpack.packb("channel_values")
# The lead bytes of msgpack's ext items: a body without any holds no ext payload.
_EXT_LEADS = tuple(bytes([lead]) for lead in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8))


def channel_entries(data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]] | None:
    """A SqliteSaver body's bytes split without reading them: (the body's map without
    its channel_values entry, [(a channel's key bytes, its value's bytes)]); None when the
    body is not one map, with one channel_values map, ending where the bytes end."""
    try:
        entries, pos = _map_header(data, 0)
        kept, values = [], None
        for _ in range(entries):
            key_end = _skip(data, pos)
            value_end = _skip(data, key_end)
            if data[pos:key_end] == _CHANNEL_VALUES and values is None:
                values = _entries(data, key_end, value_end)
            else:
                kept.append(data[pos:value_end])
            pos = value_end
    except _Layout:
        return None
    if values is None or pos != len(data):
        return None
    rest = ormsgpack.packb({}) if not kept else _map_of(len(kept)) + b"".join(kept)
    return rest, values


def _entries(data: bytes, start: int, end: int) -> list[tuple[bytes, bytes]]:
    count, pos = _map_header(data, start)
    found = []
    for _ in range(count):
        key_end = _skip(data, pos)
        value_end = _skip(data, key_end)
        found.append((data[pos:key_end], data[key_end:value_end]))
        pos = value_end
    if pos != end:
        raise _Layout
    return found


def _map_of(entries: int) -> bytes:
    if entries <= 0x0F:
        return bytes([0x80 | entries])
    if entries <= 0xFFFF:
        return b"\xde" + entries.to_bytes(2, "big")
    return b"\xdf" + entries.to_bytes(4, "big")


# -- opening ------------------------------------------------------------------------------
@contextmanager
def postgres_tables(url: str, name: str) -> Iterator[TableSource]:
    """A PostgresSaver database by URL, read in one read-only snapshot per thread."""
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True)
    except Exception as exc:  # noqa: BLE001 - the driver's own error, named
        raise CheckpointConfigError(
            f"cannot open the PostgresSaver database {name}: {exc}", field="source"
        ) from exc
    try:

        def query(sql: str, args: tuple) -> list[tuple]:
            try:
                return conn.execute(sql, args).fetchall()
            except psycopg.Error as exc:  # a permission, a dropped table: named
                raise CheckpointConfigError(
                    f"cannot read the PostgresSaver database {name}: {exc}", field="source"
                ) from exc

        @contextmanager
        def snapshot():
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield

        yield TableSource(_PostgresTables(query, snapshot), name, own_connection=True)
    finally:
        conn.close()


@contextmanager
def sqlite_tables(path: str, name: str) -> Iterator[TableSource]:
    """A SqliteSaver file, opened read-only (a missing file is refused, never created)."""
    if not os.path.isfile(path):
        raise CheckpointConfigError(f"SqliteSaver file {path!r} does not exist", field="source")
    try:
        conn = sqlite3.connect(
            f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, check_same_thread=False
        )
        source = TableSource(_SqliteTables(_sqlite_query(conn, name)), name, own_connection=True)
    except sqlite3.DatabaseError as exc:
        raise CheckpointConfigError(
            f"cannot read the SqliteSaver file {path!r}: {exc}", field="source"
        ) from exc
    try:
        yield source
    finally:
        conn.close()


def tables_of(saver) -> TableSource | None:
    """The tables of a PostgresSaver or SqliteSaver object, read as above; None for any
    other saver."""
    module = type(saver).__module__
    name = type(saver).__name__
    if module.startswith("langgraph.checkpoint.postgres"):

        def query(sql: str, args: tuple) -> list[tuple]:
            with saver._cursor() as cur:
                cur.execute(sql, args)
                return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur]

        @contextmanager
        def snapshot():
            yield

        return TableSource(_PostgresTables(query, snapshot), name)
    if module.startswith("langgraph.checkpoint.sqlite"):
        saver.setup()  # its tables, as its own first read would make them
        plain = _sqlite_query(saver.conn, name)

        def locked(sql: str, args: tuple) -> list[tuple]:
            with saver.lock:
                return plain(sql, args)

        return TableSource(_SqliteTables(locked), name)
    return None


def _sqlite_query(conn: sqlite3.Connection, name: str) -> Query:
    def query(sql: str, args: tuple) -> list[tuple]:
        try:
            cur = conn.execute(sql.replace("%s", "?"), args)
            try:
                return cur.fetchall()
            finally:
                cur.close()
        except sqlite3.DatabaseError as exc:  # a damaged file, a table of another shape
            raise CheckpointConfigError(
                f"cannot read the SqliteSaver file {name}: {exc}", field="source"
            ) from exc

    return query
