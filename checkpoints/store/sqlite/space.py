"""Disk space of a SQLite store: giving a sweep's freed pages back, compacting.

SQLite keeps deleted pages in the file unless the file is in ``auto_vacuum=INCREMENTAL``
mode (new stores are, see `connection.tune_sqlite`) and something asks for them back; a
store made before that is converted by one VACUUM (``compact_checkpoint_store``).
"""

from __future__ import annotations

import os

from django.db import connections

from checkpoints.store.sqlite.connection import warm_connection

# Pages one sweep batch gives back at most (64 MB at SQLite's default 4 KB page): bounds
# how long the write lock is held. A batch deletes at most SWEEP_BATCH_SIZE threads.
SQLITE_VACUUM_PAGES = 16384


def reclaim_space(using: str, *, final: bool = False) -> int | None:
    """Give up to SQLITE_VACUUM_PAGES freed pages back to the file system (the contract's
    ``reclaim_space``); ``final`` also checkpoints the WAL into the file."""
    with warm_connection(using, write=True):
        wrapper = connections[using]
        if wrapper.in_atomic_block:
            return None  # executescript would commit the caller's transaction
        with wrapper.cursor() as cur:
            before = _sqlite_bytes(cur)
            # Through execute() sqlite3 steps the pragma once: one page. executescript
            # runs it to the end (and commits first, which autocommit has nothing for).
            with wrapper.wrap_database_errors:
                wrapper.connection.executescript(
                    f"PRAGMA incremental_vacuum({SQLITE_VACUUM_PAGES})"
                )
            freed = before - _sqlite_bytes(cur)
            if final:
                # The file itself shrinks when the WAL is checkpointed into it.
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cur.fetchall()
    return freed


def compact(using: str) -> dict:
    """Rebuild the file in incremental auto-vacuum mode (the contract's ``compact``)."""
    conn = connections[using]
    path = str(conn.settings_dict["NAME"])
    with warm_connection(using, write=True):
        with conn.cursor() as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cur.fetchall()
            before = _file_bytes(path)
            cur.execute("PRAGMA auto_vacuum")
            was = cur.fetchone()[0]
            # Takes effect with the VACUUM: the file is rebuilt in incremental mode.
            cur.execute("PRAGMA auto_vacuum = INCREMENTAL")
            cur.execute("VACUUM")
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cur.fetchall()
            cur.execute("PRAGMA auto_vacuum")
            now = cur.fetchone()[0]
    return {
        "provider": "sqlite",
        "path": path,
        "bytes_before": before,
        "bytes_after": _file_bytes(path),
        "auto_vacuum_before": _AUTO_VACUUM.get(was, str(was)),
        "auto_vacuum": _AUTO_VACUUM.get(now, str(now)),
    }


_AUTO_VACUUM = {0: "none", 1: "full", 2: "incremental"}


def _sqlite_bytes(cur) -> int:
    cur.execute("PRAGMA page_count")
    pages = cur.fetchone()[0]
    cur.execute("PRAGMA page_size")
    return pages * cur.fetchone()[0]


def _file_bytes(path: str) -> int:
    """The database file and its WAL, as the file system counts them."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
