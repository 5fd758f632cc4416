"""Django connections for SQLite calls: an open one lent to threads that come without one,
one writer at a time per file, and a write transaction without ``atomic``'s bookkeeping.

Patches Django internals (its thread-local connection slot and a connection's owning
thread); `tests/checkpoints/store/test_django_internals.py` fails if an upgrade moves them.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction

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
