"""One sweep at a time per store: the lock each provider offers for it."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from checkpoints.savers.base import StoreSaver
from retention.errors import SweepAlreadyRunning

LOCK_NAME = "checkpoint-sweep"
# A fixed 64-bit key: the database is the store, so one key per database is per store.
ADVISORY_KEY = zlib.crc32(LOCK_NAME.encode())
REDIS_LOCK_KEY = "checkpoint-sweep:lock"
REDIS_LOCK_SECONDS = 600

_process_locks: dict[str, threading.Lock] = {}
_process_locks_guard = threading.Lock()


def _refused(saver: StoreSaver, how: str) -> SweepAlreadyRunning:
    return SweepAlreadyRunning(
        f"another sweep is running on the {saver.provider} store ({how}); this one deleted "
        "nothing, try again when it ends"
    )


def store_key(saver: StoreSaver) -> str:
    """A name for the store behind a saver, the same in every saver built on it."""
    if saver.provider in ("postgres", "sqlite"):
        from django.db import connections

        entry = connections[saver.using].settings_dict
        where = f"{entry.get('HOST') or ''}:{entry.get('PORT') or ''}"
        return f"{saver.provider}:{where}:{entry['NAME']}"
    if saver.provider == "memory":
        return f"memory:{id(saver.store)}"
    return f"{saver.provider}:{id(saver)}"


def redis_client(saver: StoreSaver):
    """The Redis connection a Redis saver writes through."""
    for name in ("client", "redis", "_client", "conn", "_redis"):
        client = getattr(saver, name, None)
        if client is not None and hasattr(client, "set"):
            return client
    raise TypeError(f"cannot find the Redis client of {type(saver).__name__}")


@contextmanager
def sweep_lock(saver: StoreSaver) -> Iterator[Callable[[], None]]:
    """Hold the store's sweep lock, or raise SweepAlreadyRunning at once.

    Yields a keep-alive to call between batches (it renews an expiring lock).
    """
    if saver.provider == "postgres":
        yield from _postgres_lock(saver)
    elif saver.provider == "redis":
        yield from _redis_lock(saver)
    else:
        yield from _process_lock(saver)


def _postgres_lock(saver: StoreSaver):
    from django.db import connections

    # Session-level, on the store's own connection: a crashed sweep's lock dies with it.
    connection = connections[saver.using]
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_KEY])
        if not cur.fetchone()[0]:
            raise _refused(saver, f"PostgreSQL advisory lock {ADVISORY_KEY} is held")
    try:
        yield lambda: None
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_KEY])


def _redis_lock(saver: StoreSaver):
    # SET NX PX with a token: expires if the sweeper dies, and only the holder releases it.
    lock = redis_client(saver).lock(
        REDIS_LOCK_KEY, timeout=REDIS_LOCK_SECONDS, blocking=False, thread_local=False
    )
    if not lock.acquire():
        raise _refused(saver, f"Redis key {REDIS_LOCK_KEY!r} is set")
    try:
        yield lock.reacquire
    finally:
        lock.release()


def _process_lock(saver: StoreSaver):
    key = store_key(saver)
    with _process_locks_guard:
        lock = _process_locks.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        raise _refused(saver, "this process is sweeping it")
    try:
        yield lambda: None
    finally:
        lock.release()
