"""A SQLite store's connections: how each is tuned when Django opens it (WAL, the busy
timeout, IMMEDIATE transactions, ``synchronous``), what a commit on it is worth
(`durability`), an open one lent to threads that come without one, one writer at a time per
file, and a write transaction without ``atomic``'s bookkeeping.

Patches Django internals (its thread-local connection slot and a connection's owning
thread); `tests/checkpoints/store/test_dialects.py` fails if an upgrade moves them.
"""

from __future__ import annotations

import _thread
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connections, transaction

from checkpoints.conf import setting

# SQLite settings for a database `checkpoints.connect` sets up from a URL: writers take the
# lock when their transaction starts (no deadlock upgrading a read), and wait for it
# instead of failing.
SQLITE_OPTIONS = {"transaction_mode": "IMMEDIATE", "timeout": 20}


# How long a SQLite writer waits for another's lock before "database is locked" (ms);
# Python's own default is 5 s, short for several graphs writing at once.
SQLITE_BUSY_TIMEOUT_MS = 20000


def tune_sqlite(sender, connection, **kwargs) -> None:
    """What concurrent graph runs need from a SQLite connection, where the project left it unset.

    A graph writes from several threads at once. WAL lets readers and a writer run side by
    side; the busy timeout makes a writer wait for the lock instead of failing; and IMMEDIATE
    transactions take the write lock when they begin: a deferred transaction that read first
    cannot upgrade to a write once another writer committed, and fails at once with
    "database is locked" whatever the timeout. A mode or timeout the project set in OPTIONS
    is kept (``checkpoints.checks`` warns about a DEFERRED mode).
    """
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return
    options = connection.settings_dict.get("OPTIONS") or {}
    if connection.transaction_mode is None and "transaction_mode" not in options:
        # Read by Django's BEGIN for every atomic block on this connection.
        connection.transaction_mode = "IMMEDIATE"
    with connection.cursor() as cursor:
        if "timeout" not in options:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _incremental_if_new(cursor)
        _switch_to_wal(cursor)
        # The project's own init_command, if it names synchronous, has the last word.
        if "synchronous" not in str(options.get("init_command") or "").lower():
            level = str(setting("SQLITE_SYNCHRONOUS")).upper()
            if level in SQLITE_SYNCHRONOUS_LEVELS:  # anything else is refused at boot
                cursor.execute(f"PRAGMA synchronous = {level}")


# PRAGMA synchronous's values, weakest first.
SQLITE_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def synchronous_level(entry: dict) -> str:
    """The synchronous level a SQLite database's connections run with (`tune_sqlite`): its
    init_command's, else CHECKPOINTS["SQLITE_SYNCHRONOUS"]."""
    init = str((entry.get("OPTIONS") or {}).get("init_command") or "")
    found = re.search(r"synchronous\s*=\s*['\"]?(\w+)", init, re.IGNORECASE)
    if found is None:
        return str(setting("SQLITE_SYNCHRONOUS")).upper()
    level = found.group(1).upper()
    return SQLITE_SYNCHRONOUS_LEVELS[int(level)] if level in "0123" else level


def _incremental_if_new(cursor) -> None:
    """A database without tables gets ``auto_vacuum = INCREMENTAL``, so a sweep can give
    freed pages back to the file system (`incremental_vacuum`).

    The mode only takes without a VACUUM before the first page is written; an init_command
    switching to WAL writes one, so an empty file that has it is vacuumed (at no cost).
    """
    cursor.execute("PRAGMA auto_vacuum")
    if cursor.fetchone()[0] != 0:
        return
    cursor.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    if cursor.fetchone() is not None:
        return  # an existing store: `compact_checkpoint_store` converts it
    cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
    cursor.execute("PRAGMA page_count")
    if cursor.fetchone()[0] > 0:
        cursor.execute("VACUUM")


def _switch_to_wal(cursor) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process's write.

    On a file not yet in WAL mode (a new one), SQLite refuses the switch at once with
    "database is locked" while another connection holds a write lock, without calling the
    busy handler (waiting could deadlock inside SQLite): four scripts opening one new file
    together failed that way. The switch is tried again until the busy timeout would have
    run out.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def durability(alias: str) -> str:
    """What a commit on ``alias``'s connection is worth under its ``synchronous``: "disk"
    when each commit is synced (FULL, EXTRA), else "os" (it survives the process, not a
    power loss or an OS crash); "memory" for an in-memory database."""
    conn = connections[alias]
    name = str(conn.settings_dict.get("NAME") or "")
    if name in ("", ":memory:") or "mode=memory" in name or conn.is_in_memory_db():
        return "memory"
    with conn.cursor() as cur:
        cur.execute("PRAGMA synchronous")
        level = cur.fetchone()[0]
    # 2 is FULL, 3 EXTRA; NORMAL (1) syncs the WAL only at checkpoints.
    return "disk" if level >= 2 else "os"


# -- lending and writing ------------------------------------------------------------------
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
    # The thread itself, not its ident: a finished thread's ident is given to the next.
    lender = threading.current_thread()
    connections[alias] = wrapper
    try:
        yield
    finally:
        if threading.current_thread() is not lender:
            # Closed from another thread (a generator the garbage collector finalized
            # there): the slots are per thread, so this one's must not change, and the
            # lender's thread keeps the connection as its own.
            pass
        else:
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
